/* fdguard.h — the agent's long-lived descriptors, kept from the program's
 * close, close_range, closefrom, dup2 and dup3 (fdguard.c); and pipes made
 * while the agent works (libunwind's), kept the same way. */
#ifndef MT_AGENT_FDGUARD_H
#define MT_AGENT_FDGUARD_H

#pragma GCC visibility push(hidden)

/* Registers the variable at `where`, which holds one of the agent's
 * descriptors, and notes the file it is open on: called again each time
 * the owner stores another descriptor there. While it holds that file,
 * the program's calls leave the descriptor open, and dup2/dup3 onto it
 * move it to another number, stored back into *where (read it with an
 * atomic load); a number the program closed behind the hooks and got
 * back is let go (*where set to -1). The owner sets *where to -1 before
 * it closes the descriptor itself, and calls mt_fd_forget before the
 * variable's memory goes away. */
void mt_fd_keep(int *where);
void mt_fd_forget(int *where);
/* In a fork child. */
void mt_fd_after_fork_child(void);
/* At start-up: finds the real close, dup2, dup3 and closefrom. */
void mt_fd_guard_init(void);

#pragma GCC visibility pop

#endif
