/* options.c — the parser of MEMTRAIL_OPTIONS: "key=value:key=value"
 * into an mt_env_options, each value checked, the first problem one line
 * naming the key, the value and what is accepted. Called once at start-up
 * (init.c), before the agent tracks anything: no allocation, no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/options.h"
#include "common/out.h"
#include "xe/xe_plan.h"

static int set_option(mt_env_options *opt, const char *key, size_t klen, const char *val, char *err,
                      size_t errlen)
{
    mt_out o;
    mt_out_init(&o, err, errlen, -1);
#define KEY_IS(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
    if (KEY_IS("mode")) {
        if (strcmp(val, "summary") == 0)
            opt->mode = MT_MODE_SUMMARY;
        else if (strcmp(val, "detail") == 0)
            opt->mode = MT_MODE_DETAIL;
        else if (strcmp(val, "trace") == 0)
            opt->mode = MT_MODE_TRACE;
        else if (strcmp(val, "off") == 0)
            opt->mode = MT_MODE_OFF;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("depth")) {
        char *end;
        long d = strtol(val, &end, 10);
        if (!*val || *end || d < 1 || d > MT_DEPTH_MAX)
            goto bad_value;
        opt->depth = (int)d;
        return 0;
    }
    if (KEY_IS("unwind")) {
        if (strcmp(val, "auto") == 0)
            opt->unwind = MT_UNWIND_AUTO;
        else if (strcmp(val, "libunwind") == 0)
            opt->unwind = MT_UNWIND_LIBUNWIND;
        else if (strcmp(val, "fp") == 0)
            opt->unwind = MT_UNWIND_FP;
        else if (strcmp(val, "cfi") == 0)
            opt->unwind = MT_UNWIND_CFI;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("trace_buffer")) {
        uint64_t v;
        if (xe_parse_size(val, 1u << 20, &v) < 0 || v < (192u << 10) || v > (64ull << 30))
            goto bad_value;
        opt->trace_buffer = v;
        return 0;
    }
    if (KEY_IS("trace_time_unit")) {
        char *end;
        long u = strtol(val, &end, 10);
        if (!*val || *end || u < 1 || u > 1000000000)
            goto bad_value;
        opt->trace_time_unit_ns = (uint32_t)u;
        return 0;
    }
    if (KEY_IS("trace_level")) {
        char *end;
        long l = strtol(val, &end, 10);
        if (!*val || *end || l < 1 || l > 19)
            goto bad_value;
        opt->trace_level = (int)l;
        return 0;
    }
    if (KEY_IS("trace_chunk")) {
        char *end;
        long n = strtol(val, &end, 10);
        if (!*val || *end || n < 1024 || n > (1l << 20))
            goto bad_value;
        opt->trace_chunk = (uint32_t)n;
        return 0;
    }
    if (KEY_IS("trace_loss")) {
        if (strcmp(val, "drop") == 0)
            opt->trace_wait = 0;
        else if (strcmp(val, "wait") == 0)
            opt->trace_wait = 1;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("on_error")) {
        if (strcmp(val, "report") == 0)
            opt->on_error = MT_ON_ERROR_REPORT;
        else if (strcmp(val, "abort") == 0)
            opt->on_error = MT_ON_ERROR_ABORT;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("output")) {
        size_t n = strlen(val);
        if (n == 0 || n >= sizeof opt->output - 256)
            goto bad_value;
        memcpy(opt->output, val, n + 1);
        return 0;
    }
    if (KEY_IS("crash_report")) {
        if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
            goto bad_value;
        opt->crash_report = strcmp(val, "on") == 0;
        return 0;
    }
    if (KEY_IS("follow_exec")) {
        if (strcmp(val, "on") == 0)
            opt->follow_exec = 1;
        else if (strcmp(val, "off") == 0)
            opt->follow_exec = 0;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("query")) {
        if (strcmp(val, "on") == 0)
            opt->query = MT_QUERY_SIGNAL;
        else if (strcmp(val, "thread") == 0)
            opt->query = MT_QUERY_THREAD;
        else if (strcmp(val, "off") == 0)
            opt->query = MT_QUERY_OFF;
        else
            goto bad_value;
        return 0;
    }
    mt_out_str(&o, "MEMTRAIL_OPTIONS: unknown key '");
    mt_out_shown(&o, key, klen);
    mt_out_str(&o, "' (accepted: mode, depth, unwind, output, trace_buffer, trace_loss, trace_time_unit, trace_level, trace_chunk, on_error, crash_report, follow_exec, query); running untracked");
    mt_out_cstr(&o);
    return -EINVAL;
bad_value:
    mt_out_str(&o, "MEMTRAIL_OPTIONS: bad value '");
    mt_out_shown(&o, val, strlen(val));
    mt_out_str(&o, "' for ");
    mt_out_shown(&o, key, klen);
    if (KEY_IS("mode"))
        mt_out_str(&o, " (accepted: summary, detail, trace, off)");
    else if (KEY_IS("trace_buffer"))
        mt_out_str(&o, " (accepted: a size from 192KB to 64GB, a number of MB or with a unit)");
    else if (KEY_IS("trace_loss"))
        mt_out_str(&o, " (accepted: drop, wait)");
    else if (KEY_IS("trace_level"))
        mt_out_str(&o, " (accepted: a zstd level from 1 to 19)");
    else if (KEY_IS("trace_chunk"))
        mt_out_str(&o, " (accepted: events per chunk, 1024 to 1048576)");
    else if (KEY_IS("trace_time_unit"))
        mt_out_str(&o, " (accepted: nanoseconds from 1 to 1000000000)");
    else if (KEY_IS("depth"))
        mt_out_str(&o, " (accepted: 1 to 64 frames)");
    else if (KEY_IS("unwind"))
        mt_out_str(&o, " (accepted: auto, cfi, libunwind, fp)");
    else if (KEY_IS("on_error"))
        mt_out_str(&o, " (accepted: report, abort)");
    else if (KEY_IS("query"))
        mt_out_str(&o, " (accepted: on, thread, off)");
    else if (KEY_IS("crash_report") || KEY_IS("follow_exec"))
        mt_out_str(&o, " (accepted: on, off)");
    else
        mt_out_str(&o, " (accepted: a file path, at most 3800 bytes; %p = pid, %e = program name)");
    mt_out_str(&o, "; running untracked");
    mt_out_cstr(&o);
    return -EINVAL;
#undef KEY_IS
}

int mt_options_parse(const char *s, mt_env_options *opt, char *err, size_t errlen)
{
    char *val = opt->value;
    if (err && errlen)
        err[0] = '\0';
    while (*s) {
        const char *key = s;
        while (*s && *s != '=' && *s != ':')
            s++;
        size_t klen = (size_t)(s - key);
        if (*s != '=') {
            if (klen == 0 && *s == ':') { /* tolerate empty fields */
                s++;
                continue;
            }
            mt_out o;
            mt_out_init(&o, err, errlen, -1);
            mt_out_str(&o, "MEMTRAIL_OPTIONS: '");
            mt_out_shown(&o, key, klen < 64 ? klen : 64);
            mt_out_str(&o, "' is not key=value (accepted keys: mode, depth, unwind, output, on_error, crash_report, follow_exec, query); running untracked");
            mt_out_cstr(&o);
            return -EINVAL;
        }
        s++;
        size_t n = 0;
        while (*s && *s != ':') {
            if (*s == '\\' && (s[1] == ':' || s[1] == '\\'))
                s++;
            if (n + 1 < sizeof opt->value)
                val[n++] = *s;
            s++;
        }
        val[n] = '\0';
        if (*s == ':')
            s++;
        if (set_option(opt, key, klen, val, err, errlen) < 0)
            return -EINVAL;
    }
    return 0;
}
