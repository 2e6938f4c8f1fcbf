/* txmq.server._relaypump: relay bytes between two connected stream sockets without the GIL.
 *
 *   start(fd_a, fd_b, early_ab, early_ba) -> Pump
 *   Pump.done -> bool          both directions ended and both sockets are closed
 *   Pump.close() -> None       shut both sockets down (both directions then end); idempotent
 *   Pump.relayed -> (a_to_b, b_to_a)   bytes written so far each way (early bytes included)
 *   Pump.error -> int          the first failure's errno (negative when a send failed); 0: none
 *
 * The permissive gRPC front (server/grpc_front.py) hands a joined connection here: start() dups both
 * descriptors (close-on-exec; the caller then closes its own, i.e. its asyncio transports), makes
 * them blocking and starts two detached threads, one per direction. Each writes its early bytes (what
 * the event loop read from its source before the join and has not written anywhere) and then loops
 * recv(src) -> send(dst) until the end:
 *   - EOF on src: shutdown(dst, SHUT_WR) (a half-close passes through; the other direction goes on);
 *   - an error reading src or writing dst: both sockets are shut down, so the other direction ends too;
 *   - when both directions have ended, the last thread closes both descriptors.
 * Writes block, so a slow reader stops its writer's thread and so its reading: back-pressure with at
 * most one buffer (RELAY_CHUNK) in flight per direction. Bytes pass unchanged and in order: one thread
 * owns a direction, it writes the early bytes before it reads anything, and it writes each chunk whole
 * before it reads the next.
 *
 * The threads never touch Python objects or the GIL (the early bytes are copied at start()); they
 * block every signal, so signals keep going to the interpreter's threads. The state they share with
 * the Pump object is a small refcounted struct: the last of the two threads and the Pump to let it
 * go frees it. close() and the last thread's close of the descriptors take the same mutex, so close()
 * never shuts down a descriptor number that was closed (and maybe reused). Written for txmq; no code
 * copied.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_CHUNK (64 * 1024)
#define RELAY_STACK (256 * 1024)

typedef struct {
    pthread_mutex_t lock;
    int fd[2];            /* [0] = a, [1] = b; -1 once closed */
    int running;          /* directions not yet ended (under lock) */
    int refs;             /* the threads still running + the Pump object (under lock) */
    int done;             /* both directions ended and the descriptors closed (under lock) */
    char *early[2];       /* early[0]: a -> b, early[1]: b -> a (malloc'd copies, or NULL) */
    size_t early_len[2];
    unsigned long long relayed[2]; /* bytes written a -> b, b -> a (each written only by its thread) */
    int error;            /* the first failure: errno, negated for a send (under lock); 0: none */
} pump_state;

typedef struct {
    pump_state *state;
    int dir; /* 0: a -> b, 1: b -> a */
} pump_arg;

static void state_unref_locked_and_unlock(pump_state *s) {
    int last = --s->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last) {
        pthread_mutex_destroy(&s->lock);
        free(s->early[0]);
        free(s->early[1]);
        free(s);
    }
}

/* Shut both sockets down (under lock): every blocked recv returns 0 and every send fails, so both
 * directions end. */
static void shutdown_both_locked(pump_state *s) {
    for (int i = 0; i < 2; i++) {
        if (s->fd[i] >= 0) {
            shutdown(s->fd[i], SHUT_RDWR);
        }
    }
}

static int send_all(int fd, const char *data, size_t len, unsigned long long *count, int *error) {
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            *error = -errno;
            return -1;
        }
        data += n;
        len -= (size_t)n;
        __atomic_add_fetch(count, (unsigned long long)n, __ATOMIC_RELAXED);
    }
    return 0;
}

static void *pump_direction(void *raw) {
    pump_arg arg = *(pump_arg *)raw;
    free(raw);
    pump_state *s = arg.state;
    /* the descriptors stay open while this direction runs (only the last thread closes them) */
    int src = s->fd[arg.dir], dst = s->fd[1 - arg.dir];
    unsigned long long *count = &s->relayed[arg.dir];
    int failed = 0, error = 0;
    char *buf = malloc(RELAY_CHUNK);
    if (buf == NULL) {
        failed = 1;
        error = ENOMEM;
    } else if (s->early_len[arg.dir]
               && send_all(dst, s->early[arg.dir], s->early_len[arg.dir], count, &error) < 0) {
        failed = 1;
    } else {
        for (;;) {
            ssize_t n = recv(src, buf, RELAY_CHUNK, 0);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                failed = 1;
                error = errno;
                break;
            }
            if (n == 0) {
                shutdown(dst, SHUT_WR); /* the end passes through; the other direction goes on */
                break;
            }
            if (send_all(dst, buf, (size_t)n, count, &error) < 0) {
                failed = 1;
                break;
            }
        }
    }
    free(buf);
    pthread_mutex_lock(&s->lock);
    if (failed) {
        shutdown_both_locked(s);
        if (s->error == 0) {
            s->error = error;
        }
    }
    if (--s->running == 0) {
        for (int i = 0; i < 2; i++) {
            close(s->fd[i]);
            s->fd[i] = -1;
        }
        __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    }
    state_unref_locked_and_unlock(s);
    return NULL;
}

typedef struct {
    PyObject_HEAD
    pump_state *state;
} PumpObject;

static void Pump_dealloc(PumpObject *self) {
    if (self->state != NULL) {
        pthread_mutex_lock(&self->state->lock);
        state_unref_locked_and_unlock(self->state); /* the threads keep relaying: the connection lives on */
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Pump_close(PumpObject *self, PyObject *Py_UNUSED(ignored)) {
    pump_state *s = self->state;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&s->lock);
    shutdown_both_locked(s);
    pthread_mutex_unlock(&s->lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Pump_get_done(PumpObject *self, void *Py_UNUSED(closure)) {
    int done = __atomic_load_n(&self->state->done, __ATOMIC_ACQUIRE);
    return PyBool_FromLong(done);
}

static PyObject *Pump_get_error(PumpObject *self, void *Py_UNUSED(closure)) {
    pump_state *s = self->state;
    int error;
    pthread_mutex_lock(&s->lock);
    error = s->error;
    pthread_mutex_unlock(&s->lock);
    return PyLong_FromLong(error);
}

static PyObject *Pump_get_relayed(PumpObject *self, void *Py_UNUSED(closure)) {
    pump_state *s = self->state;
    return Py_BuildValue("(KK)", __atomic_load_n(&s->relayed[0], __ATOMIC_RELAXED),
                         __atomic_load_n(&s->relayed[1], __ATOMIC_RELAXED));
}

static PyMethodDef Pump_methods[] = {
    {"close", (PyCFunction)Pump_close, METH_NOARGS, "Shut both sockets down: both directions end."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Pump_getset[] = {
    {"done", (getter)Pump_get_done, NULL, "Both directions ended and both sockets closed.", NULL},
    {"relayed", (getter)Pump_get_relayed, NULL, "Bytes written (a -> b, b -> a).", NULL},
    {"error", (getter)Pump_get_error, NULL, "The first failure's errno (negative: a send's); 0: none.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PumpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "txmq.server._relaypump.Pump",
    .tp_basicsize = sizeof(PumpObject),
    .tp_dealloc = (destructor)Pump_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Two sockets relayed both ways by two threads without the GIL (made by start()).",
    .tp_methods = Pump_methods,
    .tp_getset = Pump_getset,
};

static int copy_early(Py_buffer *view, char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (view->len == 0) {
        return 0;
    }
    *out = malloc((size_t)view->len);
    if (*out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(*out, view->buf, (size_t)view->len);
    *out_len = (size_t)view->len;
    return 0;
}

static int make_blocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) {
        return -1;
    }
    return (flags & O_NONBLOCK) ? fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) : 0;
}

static PyObject *relay_start(PyObject *Py_UNUSED(module), PyObject *args) {
    int fd_a, fd_b;
    Py_buffer early_ab, early_ba;
    if (!PyArg_ParseTuple(args, "iiy*y*:start", &fd_a, &fd_b, &early_ab, &early_ba)) {
        return NULL;
    }
    PumpObject *pump = NULL;
    pump_state *s = calloc(1, sizeof(pump_state));
    if (s == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    s->fd[0] = s->fd[1] = -1;
    pthread_mutex_init(&s->lock, NULL);
    if (copy_early(&early_ab, &s->early[0], &s->early_len[0]) < 0
        || copy_early(&early_ba, &s->early[1], &s->early_len[1]) < 0) {
        goto fail;
    }
    int given[2] = {fd_a, fd_b};
    for (int i = 0; i < 2; i++) {
        s->fd[i] = fcntl(given[i], F_DUPFD_CLOEXEC, 0);
        if (s->fd[i] < 0 || make_blocking(s->fd[i]) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
    }
    pump = PyObject_New(PumpObject, &PumpType);
    if (pump == NULL) {
        goto fail;
    }
    pump->state = NULL;

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, RELAY_STACK);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the threads inherit a mask blocking every signal */
    /* Both directions count as running before either starts: a direction that ends at once (its
     * source already at its end) must not see itself the last one and close the descriptors under
     * the other. refs: the Pump's and each thread's. */
    s->running = 2;
    s->refs = 3;
    int started = 0, err = 0;
    for (int dir = 0; dir < 2 && err == 0; dir++) {
        pump_arg *arg = malloc(sizeof(pump_arg));
        if (arg == NULL) {
            err = ENOMEM;
            break;
        }
        arg->state = s;
        arg->dir = dir;
        pthread_t tid;
        err = pthread_create(&tid, &attr, pump_direction, arg);
        if (err != 0) {
            free(arg);
            break;
        }
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    PyBuffer_Release(&early_ab);
    PyBuffer_Release(&early_ba);
    pump->state = s;
    if (started < 2) { /* the connection is lost (the caller closes its side): end what runs */
        pthread_mutex_lock(&s->lock);
        s->running -= 2 - started;
        s->refs -= 2 - started;
        shutdown_both_locked(s);
        if (s->running == 0) {
            for (int i = 0; i < 2; i++) {
                close(s->fd[i]);
                s->fd[i] = -1;
            }
            __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&s->lock);
        Py_DECREF(pump);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return (PyObject *)pump;

fail:
    PyBuffer_Release(&early_ab);
    PyBuffer_Release(&early_ba);
    if (s != NULL) {
        for (int i = 0; i < 2; i++) {
            if (s->fd[i] >= 0) {
                close(s->fd[i]);
            }
        }
        pthread_mutex_destroy(&s->lock);
        free(s->early[0]);
        free(s->early[1]);
        free(s);
    }
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"start", relay_start, METH_VARARGS,
     "start(fd_a, fd_b, early_ab, early_ba) -> Pump: relay the two sockets (dup'ed here) both ways."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef relaypump_module = {
    PyModuleDef_HEAD_INIT, "txmq.server._relaypump",
    "Two connected sockets relayed both ways by threads that never take the GIL.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__relaypump(void) {
    if (PyType_Ready(&PumpType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&relaypump_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&PumpType);
    if (PyModule_AddObject(module, "Pump", (PyObject *)&PumpType) < 0) {
        Py_DECREF(&PumpType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
