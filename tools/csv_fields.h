/*
 * csv_fields.h
 *	  Typing the fields of a CSV file, for the command-line tools: which type
 *	  a column's values make (inference), and each value parsed strictly, so
 *	  that nothing is lost silently: "0412" is a code (a string), not 412;
 *	  "7a00" is not an integer; "0x10", "inf" and "nan" are not numbers;
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
	CSV_FLOAT,					/* decimal number, finite */
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
 * number would drop the zero.  A column of no values is a string.
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

/* Strict parses: the whole value, nothing before or after. */
bool		csv_parse_int(const char *s, int64_t *v);
bool		csv_parse_float(const char *s, double *v);
bool		csv_parse_bool(const char *s, bool *v);

/* "0412", "-07", "00.5": digits after a leading zero (a code, not a number). */
bool		csv_leading_zero(const char *s);

/* A UTF-8 byte order mark at the start of s: its length (3), else 0. */
int			csv_bom_length(const char *s);

#endif							/* TDB_CSV_FIELDS_H */
