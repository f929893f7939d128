/*
 * test_checksum.c
 *	  CRC-32C against published vectors (RFC 3720 B.4), and the hardware
 *	  and table paths against each other at every length and alignment.
 */
#include "unit.h"
#include "checksum.h"

#include <stdlib.h>
#include <string.h>

UNIT_TEST(test_crc32c_known_vectors)
{
	unsigned char buf[32];

	CHECK_EQ_U64(tdb_crc32c("", 0), 0);
	CHECK_EQ_U64(tdb_crc32c("123456789", 9), 0xE3069283u);

	memset(buf, 0, sizeof(buf));
	CHECK_EQ_U64(tdb_crc32c(buf, 32), 0x8A9136AAu);
	memset(buf, 0xFF, sizeof(buf));
	CHECK_EQ_U64(tdb_crc32c(buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char) i;
	CHECK_EQ_U64(tdb_crc32c(buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char) (31 - i);
	CHECK_EQ_U64(tdb_crc32c(buf, 32), 0x113FDB5Cu);

	/* incremental updates give the one-shot result */
	{
		uint32_t	c = TDB_CRC32C_INIT;

		c = tdb_crc32c_update(c, "1234", 4);
		c = tdb_crc32c_update(c, "56789", 5);
		CHECK_EQ_U64(tdb_crc32c_final(c), 0xE3069283u);
	}
}

UNIT_TEST(test_crc32c_paths_agree)
{
	unsigned char buf[1024 + 8];
	uint64_t	seed = 42;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char) unit_rand(&seed);

	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len <= 1024; len += (len < 64 ? 1 : 37))
		{
			uint32_t	hw,
						sw;

			tdb_crc32c_force_software(0);
			hw = tdb_crc32c(buf + off, len);
			tdb_crc32c_force_software(1);
			sw = tdb_crc32c(buf + off, len);
			if (hw != sw)
				unit_fail(__FILE__, __LINE__, "offset %zu length %zu: %08x != %08x", off, len, hw, sw);
		}
	tdb_crc32c_force_software(0);
}

/* Buffers long enough for the three-lane path (chunks of 3 x 8 kB), at odd lengths and offsets. */
UNIT_TEST(test_crc32c_long_buffers_agree)
{
	size_t		cap = 3 * 3 * 8192 + 4096;
	unsigned char *buf = malloc(cap);
	uint64_t	seed = 7;
	size_t		lens[] = {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 8, 2 * 3 * 8192 + 13, 3 * 3 * 8192 + 4000};

	if (buf == NULL)
		unit_fail(__FILE__, __LINE__, "out of memory");
	for (size_t i = 0; i < cap; i++)
		buf[i] = (unsigned char) unit_rand(&seed);
	for (size_t off = 0; off < 3; off++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		{
			uint32_t	hw,
						sw,
						split;

			if (off + lens[k] > cap)
				continue;
			tdb_crc32c_force_software(0);
			hw = tdb_crc32c(buf + off, lens[k]);
			/* in two calls, the first ending mid-chunk */
			split = tdb_crc32c_final(tdb_crc32c_update(tdb_crc32c_update(TDB_CRC32C_INIT, buf + off, 5000),
													  buf + off + 5000, lens[k] - 5000));
			tdb_crc32c_force_software(1);
			sw = tdb_crc32c(buf + off, lens[k]);
			if (hw != sw || split != sw)
				unit_fail(__FILE__, __LINE__, "offset %zu length %zu: %08x / %08x != %08x", off, lens[k], hw, split, sw);
		}
	tdb_crc32c_force_software(0);
	free(buf);
}
