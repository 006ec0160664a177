/* show.h — a name someone else chose (a request span's, given to
 * mt_span_begin by the program) shown on a terminal. Printable text stays
 * as it is, UTF-8 included; every byte of a control character (C0, DEL,
 * and C1 in its two-byte UTF-8 form), every byte that is not part of valid
 * UTF-8, and the backslash are written as \xNN (the backslash as \\), the
 * escapes mt_out_shown (out.h) writes in the agent's messages: a name can
 * neither drive the terminal (ESC [ ...) nor end or forge a line, and
 * reads back unambiguously. JSON has its own escapes (json_out.h). */
#ifndef MT_COMMON_SHOW_H
#define MT_COMMON_SHOW_H

#include <stdio.h>

/* Writes s to out as described. */
void mt_show(FILE *out, const char *s);

#endif
