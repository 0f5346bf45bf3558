/* The one way the library writes the JSON documents it hands Python (the option table, the shared
 * layouts, the state dump): a buffer that grows as the text does, so no document is ever cut short
 * or written past its end, and strings escaped as JSON wants them. */
#ifndef DBT_JSONBUF_H
#define DBT_JSONBUF_H

#include <stddef.h>

struct dbt_jbuf {
    char *p;
    size_t len, cap;
    int failed; /* memory ran out: every later write is dropped, and finish says so */
};

void dbt_jb_printf(struct dbt_jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string of s. */
void dbt_jb_str(struct dbt_jbuf *b, const char *s);
/* A JSON string of at most n bytes of s (a string in shared memory is read with a bound). */
void dbt_jb_strn(struct dbt_jbuf *b, const char *s, size_t n);
/* The document, malloc'd (the caller frees it); NULL when memory ran out. */
char *dbt_jb_finish(struct dbt_jbuf *b);

#endif
