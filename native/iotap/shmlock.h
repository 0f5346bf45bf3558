/* Locks in shared memory that a killed holder cannot leave held: process-shared and robust. The
 * next locker of a lock whose holder died gets EOWNERDEAD, marks it consistent and goes on (the
 * critical sections are arithmetic on state that stays usable). */
#ifndef DBT_SHMLOCK_H
#define DBT_SHMLOCK_H

#include <errno.h>
#include <pthread.h>

static inline void dbt_shmlock_init(pthread_mutex_t *m) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

static inline void dbt_shmlock_lock(pthread_mutex_t *m) {
    if (pthread_mutex_lock(m) == EOWNERDEAD) pthread_mutex_consistent(m);
}

#endif
