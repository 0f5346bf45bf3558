/* See jsonbuf.h. */
#include "jsonbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(struct dbt_jbuf *b, size_t need) {
    if (b->failed) return -1;
    if (need < b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap <= need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void dbt_jb_printf(struct dbt_jbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (grow(b, b->len + (size_t)n + 1) != 0) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void dbt_jb_strn(struct dbt_jbuf *b, const char *s, size_t n) {
    /* at most 6 bytes per byte (\u00XX), and the quotes */
    if (grow(b, b->len + 6 * n + 3) != 0) return;
    char *o = b->p + b->len;
    *o++ = '"';
    for (const char *end = s + n; s < end && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    *o = '\0';
    b->len = (size_t)(o - b->p);
}

void dbt_jb_str(struct dbt_jbuf *b, const char *s) { dbt_jb_strn(b, s, strlen(s)); }

char *dbt_jb_finish(struct dbt_jbuf *b) {
    if (b->failed || grow(b, b->len + 1) != 0) {
        free(b->p);
        *b = (struct dbt_jbuf){0};
        return NULL;
    }
    b->p[b->len] = '\0';
    char *p = b->p;
    *b = (struct dbt_jbuf){0};
    return p;
}
