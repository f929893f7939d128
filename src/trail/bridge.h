/*
 * bridge.h
 *	  Which gaps between the blocks a scan announced the pager fetches
 *	  through (pager.c's read-ahead), as a function of the block numbers
 *	  alone, so that the unit tests can check the choice.
 */
#ifndef TDB_TRAIL_BRIDGE_H
#define TDB_TRAIL_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * missing[0 .. nmiss-1]: sorted, distinct block numbers.  Marks fill[i]
 * (fill has nmiss entries, cleared by the caller) for each gap before
 * missing[i] to fetch through: gaps of at most max_gap blocks, the
 * smallest first, while the blocks added stay within budget and nmiss
 * plus them within room, and gap_ok (NULL: every gap) accepts the gap's
 * blocks [from, to).  Returns the blocks added (the gaps' sum), or -1 when
 * out of memory (nothing marked).
 */
int64_t		trail_bridge_plan(const uint64_t *missing, int nmiss, uint64_t max_gap,
							  uint64_t budget, uint64_t room,
							  bool (*gap_ok) (void *arg, uint64_t from, uint64_t to),
							  void *arg, bool *fill);

#endif
