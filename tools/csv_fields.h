/*
 * csv_fields.h
 *	  Typing the fields of a CSV file, for the command-line tools: which type
 *	  a column's values make (inference), and each value parsed strictly, so
 *	  that nothing is lost silently: "0412" is a code (a string), not 412;
 *	  "7a00" is not an integer; "0x10" is not a number; NaN, Infinity and
 *	  -Infinity (the spellings PostgreSQL accepts, in any case) are floats;
 *	  an integer beyond 64 bits is an integer out of range, never a float;
 *	  true/false are booleans.  No I/O, no exits: the caller words its errors
 *	  with the line and column, and these functions say what the value is not.
 *
 * Kept apart from the tools so that the trail CLI (tools/trafficdb-trail.c)
 * and the stream CLI can share one set of rules.
 */
#ifndef TDB_CSV_FIELDS_H
#define TDB_CSV_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum CsvType
{
	CSV_INT,					/* decimal integer, no leading zero, fits int64 */
	CSV_FLOAT,					/* decimal number, NaN or [+-]Infinity (or [+-]inf) */
	CSV_STRING,
	CSV_BOOL					/* true or false (inferred); t/f, yes/no, on/off, 1/0 when declared */
} CsvType;

/* "int", "float", "string", "bool": true and *t set; false for any other name. */
bool		csv_type_by_name(const char *name, CsvType *t);
const char *csv_type_name(CsvType t);

/* What one value is not, for an error message: "an integer", ... */
const char *csv_type_noun(CsvType t);

/*
 * Inference over a column's non-empty values: the narrowest type all of them
 * fit, in the order bool, int, float, string.  A value with a leading zero
 * ("0412", "-07", "00") keeps the column a string: it is a code, and a
 * number would drop the zero.  A column of no values is a string.  A column
 * of integers is int even if one is beyond 64 bits: that value is then an
 * error when parsed (csv_parse_int), not a reason to make the column float
 * (which would round it, 99999999999999999999 to 1e+20) or text; so is a
 * column of numbers float even if one is beyond a double's range ("1e999").
 * NaN and Infinity make a column float, not text.
 */
typedef struct CsvInfer
{
	bool		any;
	bool		all_bool;
	bool		all_int;
	bool		all_float;
} CsvInfer;

void		csv_infer_init(CsvInfer *in);
void		csv_infer_add(CsvInfer *in, const char *value);
CsvType		csv_infer_result(const CsvInfer *in);

/*
 * Strict parses: the whole value, nothing before or after.  csv_parse_float
 * takes NaN, Infinity, +Infinity, -Infinity, inf, +inf, -inf in any case (as
 * PostgreSQL's float8 does); a decimal beyond a double's range ("1e999") is
 * refused, not made infinite.
 */
bool		csv_parse_int(const char *s, int64_t *v);
bool		csv_parse_float(const char *s, double *v);
/* [+-]digits, whatever their size: csv_parse_int refuses it only for its range. */
bool		csv_int_literal(const char *s);
/* A float's syntax (decimal, NaN or an infinity), whatever its range. */
bool		csv_float_literal(const char *s);
bool		csv_parse_bool(const char *s, bool *v);

/* "0412", "-07", "00.5": digits after a leading zero (a code, not a number). */
bool		csv_leading_zero(const char *s);

/* A UTF-8 byte order mark at the start of s: its length (3), else 0. */
int			csv_bom_length(const char *s);

#endif							/* TDB_CSV_FIELDS_H */
