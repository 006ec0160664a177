/* refset.h — reference sets (docs/refset.md): the `memtrail refset`
 * subcommands. The recorder (record*.c) writes a recording
 * (refset_file.h); the report (report*.c) reads it and computes, for any
 * viewport, Size, Impact Size and impact types by process, category,
 * class and stack. */
#ifndef MT_REFSET_H
#define MT_REFSET_H

/* argv[0] is "record" / "report". Exit codes as cli.h. */
int refset_record_main(int argc, char **argv);
int refset_report_main(int argc, char **argv);

#endif
