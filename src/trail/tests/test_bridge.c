/*
 * test_bridge.c
 *	  The gaps a trail scan's read-ahead fetches through
 *	  (src/trail/bridge.c): the smallest first for a budget of blocks (the
 *	  rule before filled them in file order, so one large gap early could
 *	  spend what would have spared several GETs), within the largest gap,
 *	  the room and the caller's veto; and on random block lists, that no
 *	  gap left out is smaller than one filled.
 */
#include <stdbool.h>
#include <string.h>

#include "bridge.h"
#include "trail_unit.h"

static bool
veto_from_20(void *arg, uint64_t from, uint64_t to)
{
	(void) arg;
	(void) to;
	return from < 20;
}

UNIT_TEST(test_bridge_smallest_gaps_first)
{
	/* gaps before each block: -, 3, 1, 1, 1 */
	uint64_t	m[] = {0, 4, 6, 8, 10};
	bool		fill[5];

	memset(fill, 0, sizeof(fill));
	/* a budget of 3 blocks: the three gaps of one (3 GETs spared), not the gap of 3 (1) */
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 16, 3, 100, NULL, NULL, fill), 3);
	CHECK(!fill[0] && !fill[1] && fill[2] && fill[3] && fill[4]);

	/* a budget of 6: every gap */
	memset(fill, 0, sizeof(fill));
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 16, 6, 100, NULL, NULL, fill), 6);
	CHECK(!fill[0] && fill[1] && fill[2] && fill[3] && fill[4]);

	/* gaps longer than max_gap stay, whatever the budget */
	memset(fill, 0, sizeof(fill));
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 2, 100, 100, NULL, NULL, fill), 3);
	CHECK(!fill[1] && fill[2] && fill[3] && fill[4]);

	/* the room: 5 blocks + at most 2 added */
	memset(fill, 0, sizeof(fill));
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 16, 100, 7, NULL, NULL, fill), 2);
	CHECK(!fill[1] && fill[2] && fill[3] && !fill[4]);

	/* nothing: no budget, no room, one block, no gap allowed */
	memset(fill, 0, sizeof(fill));
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 16, 0, 100, NULL, NULL, fill), 0);
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 16, 100, 5, NULL, NULL, fill), 0);
	CHECK_EQ_U64(trail_bridge_plan(m, 1, 16, 100, 100, NULL, NULL, fill), 0);
	CHECK_EQ_U64(trail_bridge_plan(m, 5, 0, 100, 100, NULL, NULL, fill), 0);
	for (int i = 0; i < 5; i++)
		CHECK(!fill[i]);

	/* the caller's veto (cached blocks in the gap): vetoed gaps left, the others still filled */
	{
		uint64_t	v[] = {10, 12, 19, 21, 23, 26};	/* gaps 1, 6, 1, 1, 2 */
		bool		f[6];

		memset(f, 0, sizeof(f));
		/* gaps starting at block 20 or later are vetoed: those before 21 (from 20), 23 and 26 */
		CHECK_EQ_U64(trail_bridge_plan(v, 6, 16, 100, 100, veto_from_20, NULL, f), 7);
		CHECK(!f[0] && f[1] && f[2] && !f[3] && !f[4] && !f[5]);
	}
}

UNIT_TEST(test_bridge_random_lists)
{
	uint64_t	seed = 20261130;

	for (int round = 0; round < 2000; round++)
	{
		int			n = 2 + (int) (unit_rand(&seed) % 60);
		uint64_t	m[64],
					max_gap = unit_rand(&seed) % 20,
					budget = unit_rand(&seed) % 40,
					room = (uint64_t) n + unit_rand(&seed) % 50,
					added = 0,
					largest_in = 0,
					smallest_out = UINT64_MAX;
		bool		fill[64];
		int64_t		got;

		m[0] = unit_rand(&seed) % 100;
		for (int i = 1; i < n; i++)
			m[i] = m[i - 1] + 1 + (unit_rand(&seed) % 4 == 0 ? unit_rand(&seed) % 30 : unit_rand(&seed) % 3);
		memset(fill, 0, sizeof(fill));
		got = trail_bridge_plan(m, n, max_gap, budget, room, NULL, NULL, fill);
		CHECK(!fill[0]);
		for (int i = 1; i < n; i++)
		{
			uint64_t	gap = m[i] - m[i - 1] - 1;

			if (fill[i])
			{
				CHECK(gap > 0 && gap <= max_gap);
				added += gap;
				largest_in = gap > largest_in ? gap : largest_in;
			}
			else if (gap > 0 && gap <= max_gap && gap < smallest_out)
				smallest_out = gap;
		}
		CHECK_EQ_U64(got, added);
		CHECK(added <= budget);
		CHECK((uint64_t) n + added <= room || added == 0);
		/* smallest first: any eligible gap left out is no smaller than every gap filled */
		if (added > 0 && smallest_out != UINT64_MAX && smallest_out < largest_in)
			unit_fail(__FILE__, __LINE__, "round %d: a gap of %llu left out, one of %llu filled", round,
					  (unsigned long long) smallest_out, (unsigned long long) largest_in);
		/* and the budget and room were used: the smallest gap left out would not have fit */
		if (smallest_out != UINT64_MAX && added + smallest_out <= budget && (uint64_t) n + added + smallest_out <= room)
			unit_fail(__FILE__, __LINE__, "round %d: a gap of %llu left out though it fits", round,
					  (unsigned long long) smallest_out);
	}
}
