/* Keeps cgroup migrations cheap while runsc starts a sandbox (cgwarm.c). */
#ifndef SBX_CGWARM_H
#define SBX_CGWARM_H

/* From a start's first step: migrations from now until cgwarm_end pass
 * without waiting for an RCU grace period. Best effort: when this process's
 * cgroup cannot be written, starts take as long as they did and end says
 * why once. Calls nest. */
void cgwarm_begin(void);
/* The thread, now (else at the first begin): a daemon that forks calls it
 * before it forks anything. */
void cgwarm_init(void);
void cgwarm_end(void);

#endif
