/*
 * checksum.h
 *	  CRC-32C (Castagnoli), the checksum of every trafficdb object and file.
 *
 * CRC-32C has hardware support on x86-64 (SSE 4.2) and ARMv8, detects all
 * burst errors up to 32 bits, and is what PostgreSQL, ext4 and iSCSI use.
 * This file has no PostgreSQL dependency: external readers link it too.
 */
#ifndef TDB_CHECKSUM_H
#define TDB_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* Start value for tdb_crc32c_update(); pass the result to tdb_crc32c_final(). */
#define TDB_CRC32C_INIT 0xFFFFFFFFu

uint32_t	tdb_crc32c_update(uint32_t crc, const void *data, size_t len);

/* Tests only: nonzero forces the portable table-driven path. */
void		tdb_crc32c_force_software(int on);

static inline uint32_t
tdb_crc32c_final(uint32_t crc)
{
	return crc ^ 0xFFFFFFFFu;
}

/* The CRC-32C of one buffer. */
static inline uint32_t
tdb_crc32c(const void *data, size_t len)
{
	return tdb_crc32c_final(tdb_crc32c_update(TDB_CRC32C_INIT, data, len));
}

#endif							/* TDB_CHECKSUM_H */
