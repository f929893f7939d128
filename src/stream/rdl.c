/*
 * rdl.c
 *	  The schema language of stream files, in the spirit of RealDB's RDL:
 *
 *	    -- a vehicle's engine log
 *	    SET blockSize = 4096;
 *	    SET fileSize = 64MB;
 *	    CREATE STREAM engine WITH ID 1 {
 *	        rpm     i16     WITH CODEC deadband PARAMS (5),
 *	        pedal   f32     NULL WITH CODEC step,
 *	        volts   f64
 *	    };
 *
 *	  Keywords are case-insensitive; types i8 i16 i32 i64 f32 f64 bool
 *	  (sizes in bits; also int16 int32 int64 float32 float64, and
 *	  PostgreSQL's smallint integer int bigint real double [precision]
 *	  boolean; int8, int2, int4, float, float4, float8 are refused as
 *	  ambiguous, with a hint); at most TDB_STREAM_MAX_STREAMS streams;
 *	  codecs sampled (the default), step, deadband (one parameter: the
 *	  threshold).  Sizes take KB, MB or GB.  Errors name the
 *	  line and column, what was found and what was expected.
 */
#include "stream/stream.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct Lexer
{
	const char *p;
	int			line,
				col;
	/* the current token */
	char		tok[64];
	int			tline,
				tcol;
	bool		eof;
	char	   *err;
	size_t		errlen;
	bool		failed;
} Lexer;

static void
lex_error(Lexer *lx, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static void
lex_error(Lexer *lx, const char *fmt,...)
{
	va_list		ap;
	char		msg[200];

	if (lx->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(lx->err, lx->errlen, "line %d, column %d: %s", lx->tline, lx->tcol, msg);
	lx->failed = true;
}

static void
advance(Lexer *lx, int n)
{
	for (int i = 0; i < n; i++)
	{
		if (*lx->p == '\n')
		{
			lx->line++;
			lx->col = 1;
		}
		else
			lx->col++;
		lx->p++;
	}
}

/* Read the next token: a word, a number (with a size suffix), or one punctuation character. */
static void
next(Lexer *lx)
{
	size_t		n = 0;

	for (;;)
	{
		while (isspace((unsigned char) *lx->p))
			advance(lx, 1);
		if (lx->p[0] == '-' && lx->p[1] == '-')
			while (*lx->p && *lx->p != '\n')
				advance(lx, 1);
		else
			break;
	}
	lx->tline = lx->line;
	lx->tcol = lx->col;
	lx->eof = *lx->p == '\0';
	if (lx->eof)
	{
		strcpy(lx->tok, "end of input");
		return;
	}
	if (isalnum((unsigned char) *lx->p) || *lx->p == '_' || *lx->p == '.' ||
		(*lx->p == '-' && isdigit((unsigned char) lx->p[1])))
	{
		do
		{
			if (n + 1 < sizeof(lx->tok))
				lx->tok[n++] = *lx->p;
			advance(lx, 1);
		} while (isalnum((unsigned char) *lx->p) || *lx->p == '_' || *lx->p == '.');
		lx->tok[n] = '\0';
		return;
	}
	lx->tok[0] = *lx->p;
	lx->tok[1] = '\0';
	advance(lx, 1);
}

static bool
is(Lexer *lx, const char *word)
{
	return !lx->eof && strcasecmp(lx->tok, word) == 0;
}

static bool
expect(Lexer *lx, const char *word)
{
	if (lx->failed)
		return false;
	if (!is(lx, word))
	{
		lex_error(lx, "expected %s, found \"%s\"", word, lx->tok);
		return false;
	}
	next(lx);
	return true;
}

/* An identifier: a letter or _, then letters, digits, _ (at most 31). */
static bool
ident(Lexer *lx, char *out, const char *what)
{
	if (lx->failed)
		return false;
	if (lx->eof || !(isalpha((unsigned char) lx->tok[0]) || lx->tok[0] == '_') || strchr(lx->tok, '.') != NULL)
	{
		lex_error(lx, "expected %s, found \"%s\"", what, lx->tok);
		return false;
	}
	if (strlen(lx->tok) >= TDB_STREAM_NAMELEN)
	{
		lex_error(lx, "%s \"%s\" is longer than %d characters", what, lx->tok, TDB_STREAM_NAMELEN - 1);
		return false;
	}
	strcpy(out, lx->tok);
	next(lx);
	return true;
}

/* A number, with an optional KB/MB/GB suffix when sized. */
static bool
number(Lexer *lx, double *out, bool sized, const char *what)
{
	char	   *end;
	double		v;

	if (lx->failed)
		return false;
	v = strtod(lx->tok, &end);
	if (end == lx->tok)
	{
		lex_error(lx, "expected %s (a number), found \"%s\"", what, lx->tok);
		return false;
	}
	if (*end != '\0')
	{
		double		mul = 0;

		if (sized && strcasecmp(end, "KB") == 0)
			mul = 1024.0;
		else if (sized && strcasecmp(end, "MB") == 0)
			mul = 1024.0 * 1024;
		else if (sized && strcasecmp(end, "GB") == 0)
			mul = 1024.0 * 1024 * 1024;
		if (mul == 0)
		{
			lex_error(lx, "expected %s, found \"%s\"%s", what, lx->tok, sized ? " (sizes take KB, MB or GB)" : "");
			return false;
		}
		v *= mul;
	}
	*out = v;
	next(lx);
	return true;
}

/*
 * Type names.  Sizes are in bits (i8 is one byte), as C's int8_t; the
 * PostgreSQL names mean what PostgreSQL means.  Names whose number could
 * be read as bits or as bytes are refused with the two readings: int8 is
 * 8 bits in RDL's old table but PostgreSQL's bigint; float is 32 bits in C
 * but double precision in SQL.  Stored files keep a type code, never a
 * name, so every file reads as it was written.
 */
static const struct
{
	const char *name;
	TdbStreamType type;
}			types[] = {
	{"i8", TDB_ST_INT8}, {"i16", TDB_ST_INT16}, {"i32", TDB_ST_INT32}, {"i64", TDB_ST_INT64},
	{"f32", TDB_ST_FLOAT32}, {"f64", TDB_ST_FLOAT64}, {"bool", TDB_ST_BOOL},
	{"int16", TDB_ST_INT16}, {"int32", TDB_ST_INT32}, {"int64", TDB_ST_INT64},
	{"float32", TDB_ST_FLOAT32}, {"float64", TDB_ST_FLOAT64},
	{"smallint", TDB_ST_INT16}, {"integer", TDB_ST_INT32}, {"int", TDB_ST_INT32}, {"bigint", TDB_ST_INT64},
	{"real", TDB_ST_FLOAT32}, {"double", TDB_ST_FLOAT64}, {"boolean", TDB_ST_BOOL},
};

static const struct
{
	const char *name;
	const char *hint;
}			ambiguous[] = {
	{"int8", "write i8 for 8 bits (what int8 meant here before), or bigint / i64 for PostgreSQL's int8 (64 bits)"},
	{"int2", "write i16 or smallint (PostgreSQL's int2, 16 bits)"},
	{"int4", "write i32 or integer (PostgreSQL's int4, 32 bits)"},
	{"float", "write f32 or real (32 bits, what float meant here before), or f64 or double precision (SQL's float)"},
	{"float4", "write f32 or real (PostgreSQL's float4, 32 bits)"},
	{"float8", "write f64 or double precision (PostgreSQL's float8, 64 bits)"},
};

const char *
tdb_stream_type_name(uint8_t type)
{
	static const char *names[] = {"?", "i8", "i16", "i32", "i64", "f32", "f64", "bool"};

	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

static void
parse_field(Lexer *lx, TdbStreamField *f)
{
	size_t		t;

	memset(f, 0, sizeof(*f));
	if (!ident(lx, f->name, "a field name"))
		return;
	for (t = 0; t < sizeof(ambiguous) / sizeof(ambiguous[0]); t++)
		if (is(lx, ambiguous[t].name))
		{
			lex_error(lx, "type %s of field %s is ambiguous: %s", lx->tok, f->name, ambiguous[t].hint);
			return;
		}
	for (t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		if (is(lx, types[t].name))
			break;
	if (t == sizeof(types) / sizeof(types[0]))
	{
		lex_error(lx, "expected a type (i8, i16, i32, i64, f32, f64, bool, or smallint, integer, bigint, real, "
				  "double precision, boolean) for field %s, found \"%s\"", f->name, lx->tok);
		return;
	}
	f->type = (uint8_t) types[t].type;
	next(lx);
	if (types[t].type == TDB_ST_FLOAT64 && is(lx, "precision"))
		next(lx);				/* double precision */
	if (is(lx, "NULL"))
	{
		f->nullable = 1;
		next(lx);
	}
	else if (is(lx, "NOT"))
	{
		next(lx);
		expect(lx, "NULL");
	}
	if (is(lx, "WITH"))
	{
		next(lx);
		if (!expect(lx, "CODEC"))
			return;
		if (is(lx, "sampled"))
			f->codec = TDB_CODEC_SAMPLED;
		else if (is(lx, "step"))
			f->codec = TDB_CODEC_STEP;
		else if (is(lx, "deadband"))
			f->codec = TDB_CODEC_DEADBAND;
		else
		{
			lex_error(lx, "expected a codec (sampled, step, deadband), found \"%s\"", lx->tok);
			return;
		}
		next(lx);
		if (f->codec == TDB_CODEC_DEADBAND)
		{
			if (!expect(lx, "PARAMS") || !expect(lx, "(") ||
				!number(lx, &f->threshold, false, "the deadband threshold") || !expect(lx, ")"))
				return;
			if (!(f->threshold >= 0))
				lex_error(lx, "the deadband threshold of %s must not be negative", f->name);
		}
		else if (is(lx, "PARAMS"))
			lex_error(lx, "codec %s takes no PARAMS", f->codec == TDB_CODEC_STEP ? "step" : "sampled");
	}
}

int
tdb_stream_parse_rdl(const char *text, TdbStreamSchema *out, char *err, size_t errlen)
{
	Lexer		lx = {.p = text, .line = 1, .col = 1, .err = err, .errlen = errlen};

	memset(out, 0, sizeof(*out));
	out->block_size = 4096;
	out->file_size = 16u << 20;
	next(&lx);
	while (!lx.eof && !lx.failed)
	{
		if (is(&lx, "SET"))
		{
			char		name[TDB_STREAM_NAMELEN];
			double		v;
			int			vline,
						vcol;

			next(&lx);
			if (!ident(&lx, name, "a setting (blockSize, fileSize)") || !expect(&lx, "="))
				break;
			vline = lx.tline;
			vcol = lx.tcol;
			if (strcasecmp(name, "blockSize") == 0)
			{
				if (number(&lx, &v, true, "a block size") && (lx.tline = vline, lx.tcol = vcol, true) && (v < 1024 || v > (1 << 24) ||
															  v != (double) (uint32_t) v ||
															  ((uint32_t) v & ((uint32_t) v - 1)) != 0))
					lex_error(&lx, "blockSize %.0f: expected a power of two from 1024 to 16MB", v);
				out->block_size = (uint32_t) v;
			}
			else if (strcasecmp(name, "fileSize") == 0)
			{
				if (number(&lx, &v, true, "a file size") && (lx.tline = vline, lx.tcol = vcol, true) &&
					(v < 16384 || v > 1e15))
					lex_error(&lx, "fileSize %.0f: expected 16KB or more", v);
				out->file_size = (uint64_t) v;
			}
			else
			{
				lex_error(&lx, "unknown setting \"%s\": expected blockSize or fileSize", name);
				break;
			}
			expect(&lx, ";");
		}
		else if (is(&lx, "CREATE"))
		{
			TdbStreamDef *d;
			double		id;

			next(&lx);
			if (!expect(&lx, "STREAM"))
				break;
			if (out->nstreams == TDB_STREAM_MAX_STREAMS)
			{
				lex_error(&lx, "a stream file holds at most %d streams; this is stream %d: put the others "
						  "in another file (a foreign server per file)", TDB_STREAM_MAX_STREAMS,
						  TDB_STREAM_MAX_STREAMS + 1);
				break;
			}
			d = &out->streams[out->nstreams];
			if (!ident(&lx, d->name, "a stream name") || !expect(&lx, "WITH") || !expect(&lx, "ID") ||
				!number(&lx, &id, false, "the stream id"))
				break;
			if (id < 0 || id > 65535 || id != (double) (uint32_t) id)
			{
				lex_error(&lx, "stream id %g: expected an integer from 0 to 65535", id);
				break;
			}
			d->id = (uint32_t) id;
			for (uint32_t s = 0; s < out->nstreams; s++)
				if (out->streams[s].id == d->id || strcasecmp(out->streams[s].name, d->name) == 0)
					lex_error(&lx, "stream %s (id %u) is defined twice", d->name, d->id);
			if (!expect(&lx, "{"))
				break;
			do
			{
				if (d->nfields == TDB_STREAM_MAX_FIELDS)
				{
					lex_error(&lx, "stream %s has more than %d fields", d->name, TDB_STREAM_MAX_FIELDS);
					break;
				}
				parse_field(&lx, &d->fields[d->nfields]);
				for (uint32_t f = 0; f < d->nfields && !lx.failed; f++)
					if (strcasecmp(d->fields[f].name, d->fields[d->nfields].name) == 0)
						lex_error(&lx, "field %s of stream %s is defined twice", d->fields[f].name, d->name);
				d->nfields++;
			} while (!lx.failed && is(&lx, ",") && (next(&lx), true));
			if (!expect(&lx, "}"))
				break;
			expect(&lx, ";");
			out->nstreams++;
		}
		else
			lex_error(&lx, "expected SET or CREATE STREAM, found \"%s\"", lx.tok);
	}
	if (!lx.failed && out->nstreams == 0)
	{
		snprintf(err, errlen, "line %d: no CREATE STREAM in the schema", lx.line);
		return TDB_STREAM_EINVAL;
	}
	return lx.failed ? TDB_STREAM_EINVAL : TDB_STREAM_OK;
}
