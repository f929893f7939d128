/*
 * checksum.c
 *	  CRC-32C: SSE 4.2 instructions where the CPU has them, slicing-by-8
 *	  tables otherwise.  The choice is made once, on first use.
 */
#include "checksum.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TDB_CRC_HAVE_SSE42_PATH 1
#include <cpuid.h>
#include <nmmintrin.h>
#endif

/* Reflected Castagnoli polynomial. */
#define CRC32C_POLY 0x82F63B78u

static uint32_t crc_table[8][256];
static int	crc_table_ready = 0;

static void
crc_build_tables(void)
{
	for (uint32_t i = 0; i < 256; i++)
	{
		uint32_t	c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
	__atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t
crc_update_sw(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
		crc_build_tables();		/* idempotent: racing threads write equal values */

	while (len >= 8)
	{
		uint64_t	w;

		memcpy(&w, p, 8);
		w ^= crc;
		crc = crc_table[7][w & 0xFF] ^
			crc_table[6][(w >> 8) & 0xFF] ^
			crc_table[5][(w >> 16) & 0xFF] ^
			crc_table[4][(w >> 24) & 0xFF] ^
			crc_table[3][(w >> 32) & 0xFF] ^
			crc_table[2][(w >> 40) & 0xFF] ^
			crc_table[1][(w >> 48) & 0xFF] ^
			crc_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
	return crc;
}

#ifdef TDB_CRC_HAVE_SSE42_PATH
/*
 * a(x) * b(x) mod P(x), both reflected (x^0 is bit 31): how a CRC register
 * is moved past bytes it did not see, for combining CRCs of pieces.
 */
static uint32_t
gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t	p = 0;

	for (uint32_t m = 1u << 31; m != 0; m >>= 1)
	{
		if (a & m)
			p ^= b;
		b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return p;
}

/*
 * Three streams of CRC32 instructions at once (the instruction's latency
 * is three times its throughput): a long buffer is taken in chunks of three
 * lanes of CRC_LANE bytes, whose registers are combined with
 * reg(A B C) = reg(A) x^(16 LANE) + reg(B) x^(8 LANE) + reg(C), where B
 * and C start from 0.  About three times the single-stream speed.
 */
#define CRC_LANE 8192			/* 8 * CRC_LANE = 2^16 bits */
static uint32_t crc_shift1;		/* x^(8 CRC_LANE) mod P */
static uint32_t crc_shift2;		/* x^(16 CRC_LANE) mod P */
static int	crc_shift_ready = 0;

static void
crc_build_shifts(void)
{
	uint32_t	p = 1u << 30;	/* x^1 */

	for (int k = 0; k < 16; k++)	/* x^(2^16) */
		p = gf2_mulmod(p, p);
	crc_shift1 = p;
	crc_shift2 = gf2_mulmod(p, p);
	__atomic_store_n(&crc_shift_ready, 1, __ATOMIC_RELEASE);
}

__attribute__((target("sse4.2")))
static uint32_t
crc_update_sse42(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t	c = crc;

	if (len >= 3 * CRC_LANE)
	{
		if (!__atomic_load_n(&crc_shift_ready, __ATOMIC_ACQUIRE))
			crc_build_shifts();	/* idempotent */
		while (len >= 3 * CRC_LANE)
		{
			uint64_t	a = c,
						b = 0,
						d = 0;

			for (size_t i = 0; i < CRC_LANE; i += 8)
			{
				uint64_t	w0,
							w1,
							w2;

				memcpy(&w0, p + i, 8);
				memcpy(&w1, p + CRC_LANE + i, 8);
				memcpy(&w2, p + 2 * CRC_LANE + i, 8);
				a = _mm_crc32_u64(a, w0);
				b = _mm_crc32_u64(b, w1);
				d = _mm_crc32_u64(d, w2);
			}
			c = gf2_mulmod(crc_shift2, (uint32_t) a) ^ gf2_mulmod(crc_shift1, (uint32_t) b) ^ (uint32_t) d;
			p += 3 * CRC_LANE;
			len -= 3 * CRC_LANE;
		}
	}
	while (len >= 8)
	{
		uint64_t	w;

		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t) c;
	while (len--)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}

static int
crc_cpu_has_sse42(void)
{
	unsigned int a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	return (c & bit_SSE4_2) != 0;
}
#endif

/* 0 = not decided yet, 1 = software, 2 = SSE 4.2 */
static int	crc_impl = 0;

void
tdb_crc32c_force_software(int on)
{
	__atomic_store_n(&crc_impl, on ? 1 : 0, __ATOMIC_RELAXED);
}

uint32_t
tdb_crc32c_update(uint32_t crc, const void *data, size_t len)
{
	int			impl = __atomic_load_n(&crc_impl, __ATOMIC_RELAXED);

	if (impl == 0)
	{
#ifdef TDB_CRC_HAVE_SSE42_PATH
		impl = crc_cpu_has_sse42() ? 2 : 1;
#else
		impl = 1;
#endif
		__atomic_store_n(&crc_impl, impl, __ATOMIC_RELAXED);
	}
#ifdef TDB_CRC_HAVE_SSE42_PATH
	if (impl == 2)
		return crc_update_sse42(crc, data, len);
#endif
	return crc_update_sw(crc, data, len);
}
