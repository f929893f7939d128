/*
 * mvt.c
 *	  A tile of the live traffic: candidates from the R-tree, each road
 *	  through mvt_geom.c, the attributes through ST_AsMVT's value table,
 *	  the byte budget of low zooms, and the bytes as protobuf-c lays out
 *	  PostGIS's vector_tile.proto (docs/design-tiles.md sections 1.5, 1.6,
 *	  4.7 and 4.9).
 */
#include "tile/mvt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Candidates past this many: walk the map's rank instead of the tile's. */
#define LARGE_TILE ((uint64_t) 1 << 18)

enum
{
	KEY_NAME,
	KEY_CLASS,
	KEY_SPEED,
	KEY_FREE_FLOW,
	KEY_CONGESTION,
	KEY_INCIDENT,
	KEY_CHANGED_GEN,
	NKEYS
};

static const char *const key_names[NKEYS] = {
	"name", "road_class", "speed_kmh", "free_flow_kmh", "congestion", "incident", "changed_generation"
};

enum
{
	V_STRING = 1,
	V_FLOAT,
	V_UINT,
	V_SINT
};

typedef struct Val
{
	const char *str;
	uint64_t	num;			/* float bits, uint, or zigzag sint */
	uint32_t	len;
	uint32_t	bytes;			/* the Value message with its field key and length */
	int32_t		id;				/* in the tile's value table; -1 none yet */
	uint32_t	mark;			/* prefix accounting: the upper bound's */
	uint32_t	mark_lb;		/* and the lower bound's */
	uint8_t		kind;
} Val;

typedef struct Feat
{
	uint64_t	rec;
	uint64_t	cmd_off;
	uint32_t	ncmd;
	uint32_t	geom_bytes;		/* varint bytes of the commands */
	uint64_t	tag_off;		/* into tags: (key, value ref) pairs */
	uint8_t		ntags;
} Feat;

typedef struct Enc
{
	const TdbMapView *map;
	const void *traffic;
	const TdbTraffic *entries;
	const TdbMvtEnv *env;
	const TdbKnnAlloc *a;
	TdbMvtTile	tile;
	TdbMvtScratch s;
	double	   *lonlat;
	size_t		lonlat_cap;
	Feat	   *feats;
	size_t		nfeats,
				feats_cap;
	uint32_t   *cmds;
	size_t		ncmds,
				cmds_cap;
	uint32_t   *tags;
	size_t		ntags,
				tags_cap;
	Val		   *vals;
	size_t		nvals,
				vals_cap;
	uint32_t   *slots;			/* value hash: ref + 1, 0 empty */
	size_t		nslots;
	uint32_t   *order;			/* value refs by id */
	uint8_t		prio[256];		/* rank of each road class */
	uint32_t	budget;
	TdbMvtProj *proj;			/* NULL: project every shape */
	bool		oom;
	uint64_t	work;
} Enc;

/* ---- small pieces -------------------------------------------------------- */

static inline size_t
varint_size(uint64_t v)
{
	size_t		n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8_t *
put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80)
	{
		*p++ = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t) v;
	return p;
}

/* tdb_mvt_grow, noting a failure in e->oom */
static bool
grow(Enc *e, void **p, size_t *cap, size_t need, size_t elem)
{
	if (tdb_mvt_grow(e->a, p, cap, need, elem))
		return true;
	e->oom = true;
	return false;
}

static uint64_t
val_hash(uint8_t kind, const char *str, uint32_t len, uint64_t num)
{
	uint64_t	h = 0xcbf29ce484222325ull ^ kind;

	if (kind == V_STRING)
	{
		for (uint32_t i = 0; i < len; i++)
			h = (h ^ (uint8_t) str[i]) * 0x100000001b3ull;
		return tdb_hash_id(h);
	}
	return tdb_hash_id(h ^ num * 0x9e3779b97f4a7c15ull);
}

/* ---- the value table (ST_AsMVT: one entry per distinct typed value) ----- */

static bool
rehash(Enc *e)
{
	size_t		n = e->nslots ? e->nslots * 2 : 1024;
	uint32_t   *s = e->a->grow(e->a->ctx, NULL, n * sizeof(uint32_t));

	if (s == NULL)
	{
		e->oom = true;
		return false;
	}
	memset(s, 0, n * sizeof(uint32_t));
	for (size_t r = 0; r < e->nvals; r++)
	{
		const Val  *v = &e->vals[r];
		size_t		pos = val_hash(v->kind, v->str, v->len, v->num) & (n - 1);

		while (s[pos] != 0)
			pos = (pos + 1) & (n - 1);
		s[pos] = (uint32_t) r + 1;
	}
	tdb_mvt_release(e->a, e->slots);
	e->slots = s;
	e->nslots = n;
	return true;
}

/* The ref of a value, added if new; UINT32_MAX when out of memory. */
static uint32_t
val_ref(Enc *e, uint8_t kind, const char *str, uint32_t len, uint64_t num)
{
	size_t		pos;
	Val		   *v;
	uint32_t	payload;

	if ((e->nvals + 1) * 2 > e->nslots && !rehash(e))
		return UINT32_MAX;
	pos = val_hash(kind, str, len, num) & (e->nslots - 1);
	while (e->slots[pos] != 0)
	{
		v = &e->vals[e->slots[pos] - 1];
		if (v->kind == kind && (kind == V_STRING ? v->len == len && memcmp(v->str, str, len) == 0
								: v->num == num))
			return e->slots[pos] - 1;
		pos = (pos + 1) & (e->nslots - 1);
	}
	if (!grow(e, (void **) &e->vals, &e->vals_cap, e->nvals + 1, sizeof(Val)))
		return UINT32_MAX;
	v = &e->vals[e->nvals];
	v->kind = kind;
	v->str = str;
	v->len = len;
	v->num = num;
	v->id = -1;
	v->mark = 0;
	v->mark_lb = 0;
	switch (kind)
	{
		case V_STRING:
			payload = 1 + (uint32_t) varint_size(len) + len;
			break;
		case V_FLOAT:
			payload = 5;
			break;
		default:
			payload = 1 + (uint32_t) varint_size(num);
			break;
	}
	v->bytes = 1 + (uint32_t) varint_size(payload) + payload;
	e->slots[pos] = (uint32_t) e->nvals + 1;
	return (uint32_t) e->nvals++;
}

static inline bool
add_tag(Enc *e, Feat *f, uint32_t key, uint8_t kind, const char *str, uint32_t len, uint64_t num)
{
	uint32_t	ref = val_ref(e, kind, str, len, num);

	if (ref == UINT32_MAX)
		return false;
	e->tags[f->tag_off + 2 * f->ntags] = key;
	e->tags[f->tag_off + 2 * f->ntags + 1] = ref;
	f->ntags++;
	return true;
}

static inline uint64_t
float_bits(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	return u;
}

/* ---- one road ------------------------------------------------------------ */

/* Run record rec through the pipeline; a feature is appended if it has one. */
static bool
process(Enc *e, uint64_t rec)
{
	const TdbLocation *loc = &e->map->records[rec];
	const TdbTraffic *t = &e->entries[rec];
	Feat	   *f;
	bool		oom;
	uint64_t	bytes = 0;
	const char *s;
	uint32_t	ilen;
	const char *inc;
	double	   *merc;

	if (e->env->interrupt && (++e->work & 4095) == 0)
		e->env->interrupt();
	if (e->proj != NULL)
	{
		merc = e->proj->merc + 2 * e->proj->off[rec];
		if (!(e->proj->done[rec / 64] & (UINT64_C(1) << (rec % 64))))
		{
			if (!grow(e, (void **) &e->lonlat, &e->lonlat_cap, 2 * (size_t) loc->npoints, sizeof(double)))
				return false;
			tdb_map_shape(e->map, rec, e->lonlat);
			tdb_mvt_project_shape(e->lonlat, loc->npoints, merc);
			e->proj->done[rec / 64] |= UINT64_C(1) << (rec % 64);
		}
	}
	else
	{
		if (!grow(e, (void **) &e->lonlat, &e->lonlat_cap, 4 * (size_t) loc->npoints, sizeof(double)))
			return false;
		tdb_map_shape(e->map, rec, e->lonlat);
		merc = e->lonlat + 2 * (size_t) loc->npoints;
		tdb_mvt_project_shape(e->lonlat, loc->npoints, merc);
	}
	if (!tdb_mvt_feature(&e->tile, merc, loc->npoints, &e->s, &oom))
	{
		if (oom)
			e->oom = true;
		return !oom;
	}
	if (!grow(e, (void **) &e->feats, &e->feats_cap, e->nfeats + 1, sizeof(Feat)) ||
		!grow(e, (void **) &e->cmds, &e->cmds_cap, e->ncmds + e->s.ncmd, sizeof(uint32_t)) ||
		!grow(e, (void **) &e->tags, &e->tags_cap, e->ntags + 2 * NKEYS, sizeof(uint32_t)))
		return false;
	f = &e->feats[e->nfeats];
	f->rec = rec;
	f->cmd_off = e->ncmds;
	f->ncmd = e->s.ncmd;
	for (uint32_t i = 0; i < e->s.ncmd; i++)
		bytes += varint_size(e->s.cmd[i]);
	f->geom_bytes = (uint32_t) bytes;
	memcpy(e->cmds + e->ncmds, e->s.cmd, e->s.ncmd * sizeof(uint32_t));
	f->tag_off = e->ntags;
	f->ntags = 0;

	/* the columns of trafficdb.locations, NULL as the table has them */
	s = tdb_map_name(e->map, rec);
	if (s[0] && !add_tag(e, f, KEY_NAME, V_STRING, s, (uint32_t) strlen(s), 0))
		return false;
	s = tdb_map_class(e->map, rec);
	if (s[0] && !add_tag(e, f, KEY_CLASS, V_STRING, s, (uint32_t) strlen(s), 0))
		return false;
	if (!isnan(t->speed_kmh) && !add_tag(e, f, KEY_SPEED, V_FLOAT, NULL, 0, float_bits(t->speed_kmh)))
		return false;
	if (!isnan(t->free_flow_kmh) &&
		!add_tag(e, f, KEY_FREE_FLOW, V_FLOAT, NULL, 0, float_bits(t->free_flow_kmh)))
		return false;
	if (t->congestion != TDB_CONGESTION_UNKNOWN &&
		!add_tag(e, f, KEY_CONGESTION, V_UINT, NULL, 0, t->congestion))
		return false;
	inc = tdb_traffic_incident(e->traffic, t, &ilen);
	if (inc != NULL)
	{
		/* text_to_cstring, then strlen: a NUL ends the string */
		const char *nul = memchr(inc, '\0', ilen);

		if (nul)
			ilen = (uint32_t) (nul - inc);
		if (!add_tag(e, f, KEY_INCIDENT, V_STRING, inc, ilen, 0))
			return false;
	}
	if (t->changed_gen != 0)
	{
		int64_t		g = (int64_t) t->changed_gen;

		if (!(g >= 0 ? add_tag(e, f, KEY_CHANGED_GEN, V_UINT, NULL, 0, (uint64_t) g)
			  : add_tag(e, f, KEY_CHANGED_GEN, V_SINT, NULL, 0,
						((uint64_t) g << 1) ^ (uint64_t) (g >> 63))))
			return false;
	}
	e->ncmds += f->ncmd;
	e->ntags += 2 * (size_t) f->ntags;
	e->nfeats++;
	return true;
}

/* ---- sizes ------------------------------------------------------------------ */

/* Payload bytes of a feature whose value ids take at most w bytes each (w = 0: exact). */
static uint64_t
feat_payload(const Enc *e, const Feat *f, size_t w)
{
	uint64_t	p = 0;
	uint64_t	tagb = 0;
	uint64_t	id = e->map->records[f->rec].id;

	if ((int64_t) id >= 0)
		p += 1 + varint_size(id);
	if (f->ntags)
	{
		for (uint32_t k = 0; k < f->ntags; k++)
			tagb += 1 + (w ? w : varint_size((uint64_t) e->vals[e->tags[f->tag_off + 2 * k + 1]].id));
		p += 1 + varint_size(tagb) + tagb;
	}
	p += 2 + 1 + varint_size(f->geom_bytes) + f->geom_bytes;
	return p;
}

/* The feature with its field key and length. */
static uint64_t
feat_size(const Enc *e, const Feat *f, size_t w)
{
	uint64_t	p = feat_payload(e, f, w);

	return 1 + varint_size(p) + p;
}

static uint64_t
fixed_layer_bytes(const Enc *e)
{
	uint64_t	n = 2 + strlen(TDB_MVT_LAYER) + 1 + varint_size(e->tile.extent) + 2;

	for (int k = 0; k < NKEYS; k++)
		n += 2 + strlen(key_names[k]);
	return n;
}

static inline uint64_t
tile_bytes(uint64_t layer)
{
	return 1 + varint_size(layer) + layer;
}

/*
 * The budget, counted as features are added in rank order.  The ids of the
 * values are assigned later, in tile order, so while adding a feature its
 * size is only known within bounds: the upper bound counts each value id at
 * the width of all the values seen so far, the lower bound at one byte.
 * fit_exact() then finds the exact longest prefix between the two.
 */
typedef struct Budget
{
	uint64_t	fixed;
	uint64_t	feats;
	uint64_t	vbytes;
	size_t		nv;
	size_t		w;
	bool		lower;
} Budget;

static void
budget_init(const Enc *e, Budget *b, bool lower)
{
	memset(b, 0, sizeof(*b));
	b->fixed = fixed_layer_bytes(e);
	b->w = 1;
	b->lower = lower;
}

/* Add list[i] after list[0 .. i): false (and nothing to undo) if it does not fit. */
static bool
budget_add(Enc *e, Budget *b, const uint32_t *list, size_t i)
{
	const Feat *f = &e->feats[list[i]];
	uint64_t	add_v = 0;
	size_t		add_n = 0;
	size_t		w2;
	uint64_t	feats = b->feats;

	for (uint32_t k = 0; k < f->ntags; k++)
	{
		Val		   *v = &e->vals[e->tags[f->tag_off + 2 * k + 1]];
		uint32_t   *mark = b->lower ? &v->mark_lb : &v->mark;

		if (*mark == 0)
		{
			*mark = 1;
			add_v += v->bytes;
			add_n++;
		}
	}
	w2 = b->lower ? 1 : varint_size(b->nv + add_n ? b->nv + add_n - 1 : 0);
	if (w2 != b->w)
	{
		/* rare (128 and 16384 values): count the features kept again */
		feats = 0;
		for (size_t j = 0; j < i; j++)
			feats += feat_size(e, &e->feats[list[j]], w2);
	}
	feats += feat_size(e, f, w2);
	if (tile_bytes(b->fixed + feats + b->vbytes + add_v) > e->budget)
		return false;
	b->feats = feats;
	b->w = w2;
	b->vbytes += add_v;
	b->nv += add_n;
	return true;
}

static int	cmp_u64(const void *a, const void *b);

/* list[0 .. k) (rank order) into out[0 .. k), in tile (record) order. */
static bool
to_record_order(Enc *e, const uint32_t *list, size_t k, uint32_t *out)
{
	uint64_t   *keys;

	if (k == 0)
		return true;
	keys = e->a->grow(e->a->ctx, NULL, k * sizeof(uint64_t));
	if (keys == NULL)
	{
		e->oom = true;
		return false;
	}
	for (size_t i = 0; i < k; i++)
		keys[i] = (e->feats[list[i]].rec << 32) | list[i];	/* both fit 32 bits */
	qsort(keys, k, sizeof(uint64_t), cmp_u64);
	for (size_t i = 0; i < k; i++)
		out[i] = (uint32_t) keys[i];
	tdb_mvt_release(e->a, keys);
	return true;
}

static void assign_ids(Enc *e, const uint32_t *list, size_t n, size_t *nids);
static uint64_t layer_bytes(const Enc *e, const uint32_t *list, size_t n, size_t nids);

/* The exact size of the tile of list[0 .. k) (rank order); UINT64_MAX when out of memory. */
static uint64_t
exact_bytes(Enc *e, const uint32_t *list, size_t k, uint32_t *tmp)
{
	size_t		nids;

	if (k == 0)
		return 0;
	if (!to_record_order(e, list, k, tmp))
		return UINT64_MAX;
	assign_ids(e, tmp, k, &nids);
	return tile_bytes(layer_bytes(e, tmp, k, nids));
}

/*
 * The longest prefix of list (n features, rank order) whose tile fits:
 * list[0 .. lo) fits, list[0 .. hi) does not unless hi >= n (then tried).
 */
static size_t
fit_exact(Enc *e, const uint32_t *list, size_t lo, size_t hi, size_t n, uint32_t *tmp)
{
	if (hi >= n)
	{
		hi = n;
		if (exact_bytes(e, list, n, tmp) <= e->budget)
			return n;
	}
	while (hi - lo > 1 && !e->oom)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (exact_bytes(e, list, mid, tmp) <= e->budget)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* ---- candidates --------------------------------------------------------------- */

typedef struct Cands
{
	Enc		   *e;
	uint32_t   *idx;
	size_t		n,
				cap;
	bool		large;
} Cands;

static int
collect(uint64_t entry, void *arg)
{
	Cands	   *c = arg;

	if (c->n >= LARGE_TILE)
	{
		c->large = true;
		return 1;
	}
	if (!grow(c->e, (void **) &c->idx, &c->cap, c->n + 1, sizeof(uint32_t)))
		return 1;
	c->idx[c->n++] = (uint32_t) entry;
	return 0;
}

static inline const TdbBoxF *
leaf_box(const TdbMapView *map, uint64_t rec)
{
	return &map->rtree.boxes[map->rtree.levels[0].first + rec];
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* ---- the bytes --------------------------------------------------------------- */

/* Value ids in first-occurrence order over list (features in tile order). */
static void
assign_ids(Enc *e, const uint32_t *list, size_t n, size_t *nids)
{
	*nids = 0;
	for (size_t r = 0; r < e->nvals; r++)
		e->vals[r].id = -1;
	for (size_t i = 0; i < n; i++)
	{
		const Feat *f = &e->feats[list[i]];

		for (uint32_t k = 0; k < f->ntags; k++)
		{
			uint32_t	ref = e->tags[f->tag_off + 2 * k + 1];

			if (e->vals[ref].id < 0)
			{
				e->vals[ref].id = (int32_t) *nids;
				e->order[(*nids)++] = ref;
			}
		}
	}
}

static uint64_t
layer_bytes(const Enc *e, const uint32_t *list, size_t n, size_t nids)
{
	uint64_t	b = fixed_layer_bytes(e);

	for (size_t i = 0; i < n; i++)
		b += feat_size(e, &e->feats[list[i]], 0);
	for (size_t i = 0; i < nids; i++)
		b += e->vals[e->order[i]].bytes;
	return b;
}

static uint8_t *
write_tile(const Enc *e, uint8_t *p, const uint32_t *list, size_t n, size_t nids, uint64_t layer)
{
	*p++ = 0x1A;				/* Tile.layers */
	p = put_varint(p, layer);
	*p++ = 0x0A;				/* Layer.name */
	*p++ = (uint8_t) strlen(TDB_MVT_LAYER);
	memcpy(p, TDB_MVT_LAYER, strlen(TDB_MVT_LAYER));
	p += strlen(TDB_MVT_LAYER);
	for (size_t i = 0; i < n; i++)
	{
		const Feat *f = &e->feats[list[i]];
		uint64_t	id = e->map->records[f->rec].id;
		uint64_t	payload = feat_payload(e, f, 0);
		uint64_t	tagb = 0;

		*p++ = 0x12;			/* Layer.features */
		p = put_varint(p, payload);
		if ((int64_t) id >= 0)
		{
			*p++ = 0x08;		/* Feature.id */
			p = put_varint(p, id);
		}
		if (f->ntags)
		{
			for (uint32_t k = 0; k < f->ntags; k++)
				tagb += 1 + varint_size((uint64_t) e->vals[e->tags[f->tag_off + 2 * k + 1]].id);
			*p++ = 0x12;		/* Feature.tags, packed */
			p = put_varint(p, tagb);
			for (uint32_t k = 0; k < f->ntags; k++)
			{
				*p++ = (uint8_t) e->tags[f->tag_off + 2 * k];
				p = put_varint(p, (uint64_t) e->vals[e->tags[f->tag_off + 2 * k + 1]].id);
			}
		}
		*p++ = 0x18;			/* Feature.type = LINESTRING */
		*p++ = 0x02;
		*p++ = 0x22;			/* Feature.geometry, packed */
		p = put_varint(p, f->geom_bytes);
		for (uint32_t c = 0; c < f->ncmd; c++)
			p = put_varint(p, e->cmds[f->cmd_off + c]);
	}
	for (int k = 0; k < NKEYS; k++)
	{
		size_t		l = strlen(key_names[k]);

		*p++ = 0x1A;			/* Layer.keys */
		*p++ = (uint8_t) l;
		memcpy(p, key_names[k], l);
		p += l;
	}
	for (size_t i = 0; i < nids; i++)
	{
		const Val  *v = &e->vals[e->order[i]];

		*p++ = 0x22;			/* Layer.values */
		switch (v->kind)
		{
			case V_STRING:
				p = put_varint(p, 1 + varint_size(v->len) + v->len);
				*p++ = 0x0A;
				p = put_varint(p, v->len);
				memcpy(p, v->str, v->len);
				p += v->len;
				break;
			case V_FLOAT:
				*p++ = 5;
				*p++ = 0x15;
				for (int b = 0; b < 4; b++)
					*p++ = (uint8_t) (v->num >> (8 * b));
				break;
			case V_UINT:
				p = put_varint(p, 1 + varint_size(v->num));
				*p++ = 0x28;
				p = put_varint(p, v->num);
				break;
			default:
				p = put_varint(p, 1 + varint_size(v->num));
				*p++ = 0x30;
				p = put_varint(p, v->num);
				break;
		}
	}
	*p++ = 0x28;				/* Layer.extent */
	p = put_varint(p, e->tile.extent);
	*p++ = 0x78;				/* Layer.version = 2 */
	*p++ = 0x02;
	return p;
}

/* ---- a tile ------------------------------------------------------------------- */

static void
enc_free(Enc *e, Cands *c, uint32_t *list)
{
	tdb_mvt_scratch_free(&e->s);
	tdb_mvt_release(e->a, e->lonlat);
	tdb_mvt_release(e->a, e->feats);
	tdb_mvt_release(e->a, e->cmds);
	tdb_mvt_release(e->a, e->tags);
	tdb_mvt_release(e->a, e->vals);
	tdb_mvt_release(e->a, e->slots);
	tdb_mvt_release(e->a, e->order);
	tdb_mvt_release(e->a, c->idx);
	tdb_mvt_release(e->a, list);
}

int
tdb_mvt_encode(const TdbMapView *map, const void *traffic, const TdbTraffic *entries,
			   uint32_t z, uint32_t x, uint32_t y, const TdbMvtOptions *opt,
			   const TdbMvtEnv *env, TdbMvtResult *out)
{
	Enc			e;
	Cands		c;
	uint32_t   *list = NULL;
	size_t		nlist = 0;
	size_t		nids = 0;
	uint64_t	layer = 0;
	uint8_t    *buf;
	size_t		list_cap = 0;
	size_t		order_cap = 0;
	bool		ids_final = false;	/* nids and layer are those of list */

	memset(&e, 0, sizeof(e));
	memset(&c, 0, sizeof(c));
	memset(out, 0, sizeof(*out));
	e.map = map;
	e.traffic = traffic;
	e.entries = entries;
	e.env = env;
	e.a = env->alloc;
	e.s.alloc = env->alloc;
	e.budget = opt->budget;
	tdb_mvt_tile_init(&e.tile, z, x, y, opt->extent, opt->buffer);
	tdb_mvt_class_priorities(map, e.prio);
	e.proj = tdb_mvt_proj_for(map, env);
	c.e = &e;

	if (map->count > 0)
		tdb_map_query_box(map, &e.tile.lonlat, collect, &c);
	if (e.oom)
		goto oom;

	if (!c.large)
	{
		/* every candidate, in record order: the tile as PostGIS makes it */
		out->candidates = c.n;
		for (size_t i = 0; i < c.n; i++)
		{
			if (z < 12 && tdb_mvt_box_too_small(&e.tile, leaf_box(map, c.idx[i])))
				continue;
			if (!process(&e, c.idx[i]))
				goto oom;
		}
		if (!grow(&e, (void **) &list, &list_cap, e.nfeats ? e.nfeats : 1, sizeof(uint32_t)) ||
			!grow(&e, (void **) &e.order, &order_cap, e.nvals ? e.nvals : 1, sizeof(uint32_t)))
			goto oom;
		for (size_t i = 0; i < e.nfeats; i++)
			list[i] = (uint32_t) i;
		nlist = e.nfeats;
		assign_ids(&e, list, nlist, &nids);
		layer = layer_bytes(&e, list, nlist, nids);
		ids_final = true;		/* unless the budget trims the list below */
		if (nlist > 0 && tile_bytes(layer) > opt->budget)
		{
			/* over budget: the best-ranked prefix that fits, back in record order */
			TdbMvtRankKey *keys = e.a->grow(e.a->ctx, NULL, nlist * sizeof(TdbMvtRankKey));

			ids_final = false;
			if (keys == NULL)
				goto oom;
			for (size_t i = 0; i < nlist; i++)
				keys[i] = tdb_mvt_rank_key(map, e.prio, e.feats[i].rec, (uint32_t) i);
			qsort(keys, nlist, sizeof(TdbMvtRankKey), tdb_mvt_cmp_rank);
			for (size_t i = 0; i < nlist; i++)
				list[i] = keys[i].idx;
			tdb_mvt_release(e.a, keys);
			{
				Budget		ub,
							lb;
				size_t		k_ub = 0,
							k_lb = 0;
				uint32_t   *tmp = e.a->grow(e.a->ctx, NULL, nlist * sizeof(uint32_t));

				if (tmp == NULL)
					goto oom;
				budget_init(&e, &ub, false);
				while (k_ub < nlist && budget_add(&e, &ub, list, k_ub))
					k_ub++;
				budget_init(&e, &lb, true);
				while (k_lb < nlist && budget_add(&e, &lb, list, k_lb))
					k_lb++;
				nlist = fit_exact(&e, list, k_ub, k_lb + 1, nlist, tmp);
				if (!to_record_order(&e, list, nlist, tmp))
					goto oom;
				memcpy(list, tmp, nlist * sizeof(uint32_t));
				tdb_mvt_release(e.a, tmp);
			}
			out->truncated = true;
		}
	}
	else
	{
		/* a low zoom over a large map: walk the map's rank, stop at the budget */
		TdbBoxF		q = tdb_boxf_from_boxd(&e.tile.lonlat);
		Budget		ub,
					lb;
		size_t		k_ub = 0;
		bool		ub_full = false;
		uint32_t   *tmp;

		if (env->rank == NULL)
			goto oom;			/* the caller must give a rank cache for large maps */
		if (env->rank->order == NULL || env->rank->map_obj != (const void *) map->hdr ||
			env->rank->map_id != map->hdr->map_id || env->rank->count != map->count)
		{
			tdb_mvt_release(env->rank_alloc, env->rank->order);
			env->rank->order = NULL;
			if (!tdb_mvt_rank_build(map, env->rank, env->rank_alloc))
				goto oom;
		}
		budget_init(&e, &ub, false);
		budget_init(&e, &lb, true);
		for (uint64_t r = 0; r < map->count; r++)
		{
			uint32_t	rec = env->rank->order[r];
			const TdbBoxF *leaf = leaf_box(map, rec);
			size_t		before = e.nfeats;

			if (leaf->xmax < q.xmin || leaf->xmin > q.xmax || leaf->ymax < q.ymin || leaf->ymin > q.ymax)
				continue;
			out->candidates++;
			if (z < 12 && tdb_mvt_box_too_small(&e.tile, leaf))
				continue;
			if (!process(&e, rec))
				goto oom;
			if (e.nfeats == before)
				continue;
			if (!grow(&e, (void **) &list, &list_cap, e.nfeats, sizeof(uint32_t)))
				goto oom;
			list[before] = (uint32_t) before;
			if (!ub_full && budget_add(&e, &ub, list, before))
				k_ub = before + 1;
			else
				ub_full = true;
			if (!budget_add(&e, &lb, list, before))
			{
				/* past the lower bound: no longer prefix can fit */
				out->truncated = true;
				e.nfeats = before;
				break;
			}
		}
		nlist = e.nfeats;
		if (!grow(&e, (void **) &e.order, &order_cap, e.nvals ? e.nvals : 1, sizeof(uint32_t)))
			goto oom;
		tmp = e.a->grow(e.a->ctx, NULL, (nlist ? nlist : 1) * sizeof(uint32_t));
		if (tmp == NULL)
			goto oom;
		if (ub_full)
		{
			nlist = fit_exact(&e, list, k_ub, nlist + 1, nlist, tmp);
			out->truncated = true;
		}
		if (!to_record_order(&e, list, nlist, tmp))
			goto oom;
		if (nlist > 0)			/* no feature kept: list was never allocated */
			memcpy(list, tmp, nlist * sizeof(uint32_t));
		tdb_mvt_release(e.a, tmp);
	}
	if (e.oom)
		goto oom;

	if (!ids_final)
	{
		assign_ids(&e, list, nlist, &nids);
		layer = nlist ? layer_bytes(&e, list, nlist, nids) : 0;
	}
	out->size = nlist ? tile_bytes(layer) : 0;
	buf = e.a->grow(e.a->ctx, NULL, env->header + out->size + 1);
	if (buf == NULL)
		goto oom;
	if (nlist)
		write_tile(&e, buf + env->header, list, nlist, nids, layer);
	for (size_t i = 0; i < nlist; i++)
	{
		uint64_t	g = entries[e.feats[list[i]].rec].changed_gen;

		if (g > out->max_changed_gen)
			out->max_changed_gen = g;
	}
	out->data = buf;
	out->features = nlist;
	enc_free(&e, &c, list);
	return TDB_MVT_OK;

oom:
	enc_free(&e, &c, list);
	return TDB_MVT_ENOMEM;
}
