// A child process with its input in memory, its output captured and a deadline:
// PDF pages are drawn by poppler's own tools in a child (VipsDecoder+PDF.swift),
// because poppler cannot be stopped in the middle of a page and a child can.
#define _GNU_SOURCE
#include "CVipsOps.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_all(int fd, const unsigned char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int CVips_run_child(const char *path, char *const argv[], const void *input, size_t input_len,
                    int timeout_ms, size_t max_output, unsigned char **output, size_t *output_len,
                    int *exit_status, char *error_tail, size_t error_cap, char *const envp[]) {
    *output = NULL;
    *output_len = 0;
    *exit_status = -1;
    if (error_cap > 0) error_tail[0] = 0;
    int result = CVIPS_CHILD_FAILED_TO_START;
    int in_fd = -1, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    pid_t pid = -1;
    unsigned char *buffer = NULL;
    size_t length = 0, capacity = 0, error_length = 0;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int have_actions = 0, have_attributes = 0;
    long long deadline = 0;

    // The input in memory (no file on disk to leave behind), read by the child as
    // its stdin; every descriptor of ours is close-on-exec, so children started
    // at the same time never hold each other's pipes open.
    in_fd = memfd_create("webimage-child-input", MFD_CLOEXEC);
    if (in_fd < 0 || write_all(in_fd, input, input_len) != 0 || lseek(in_fd, 0, SEEK_SET) != 0) goto done;
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) goto done;
    if (posix_spawn_file_actions_init(&actions) != 0) goto done;
    have_actions = 1;
    if (posix_spawn_file_actions_adddup2(&actions, in_fd, 0) != 0 ||
        posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1) != 0 ||
        posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2) != 0) goto done;
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
    // Nor any descriptor another library opened without close-on-exec (a socket
    // of a Redis client, say): the child gets its three and nothing else.
    if (posix_spawn_file_actions_addclosefrom_np(&actions, 3) != 0) goto done;
#endif
    if (posix_spawnattr_init(&attributes) != 0) goto done;
    have_attributes = 1;
    // No signal of ours carries over: a server that ignores SIGPIPE or blocks
    // SIGTERM must not pass that on to the child.
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    if (posix_spawnattr_setsigdefault(&attributes, &all) != 0 || posix_spawnattr_setsigmask(&attributes, &none) != 0 ||
        posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) != 0) goto done;
    int spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp ? envp : environ);
    if (spawned != 0) {
        errno = spawned;  // posix_spawn returns its error rather than setting errno
        pid = -1;
        goto done;
    }
    close(out_pipe[1]);
    out_pipe[1] = -1;
    close(err_pipe[1]);
    err_pipe[1] = -1;

    deadline = now_ms() + timeout_ms;
    result = CVIPS_CHILD_OK;
    int open_fds = 2;
    while (open_fds > 0) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            result = CVIPS_CHILD_TIMED_OUT;
            break;
        }
        struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
        int ready = poll(fds, 2, left > 1000 ? 1000 : (int)left);
        if (ready < 0) {
            if (errno == EINTR) continue;
            result = CVIPS_CHILD_FAILED_TO_START;
            break;
        }
        if (fds[0].fd >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (capacity - length < 65536) {
                size_t grown = capacity == 0 ? 262144 : capacity * 2;
                unsigned char *bigger = realloc(buffer, grown);
                if (!bigger) {
                    result = CVIPS_CHILD_OUTPUT_TOO_LARGE;
                    break;
                }
                buffer = bigger;
                capacity = grown;
            }
            ssize_t n = read(out_pipe[0], buffer + length, capacity - length);
            if (n > 0) {
                length += (size_t)n;
                if (length > max_output) {
                    result = CVIPS_CHILD_OUTPUT_TOO_LARGE;
                    break;
                }
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(out_pipe[0]);
                out_pipe[0] = -1;
                open_fds--;
            }
        }
        if (fds[1].fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char chunk[4096];
            ssize_t n = read(err_pipe[0], chunk, sizeof chunk);
            if (n > 0) {
                // The last error_cap - 1 bytes of stderr: the tools say why at the end.
                for (ssize_t i = 0; i < n && error_cap > 1; i++) {
                    if (error_length == error_cap - 1) {
                        memmove(error_tail, error_tail + 1, error_cap - 2);
                        error_length--;
                    }
                    error_tail[error_length++] = chunk[i];
                }
                if (error_cap > 0) error_tail[error_length] = 0;
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(err_pipe[0]);
                err_pipe[0] = -1;
                open_fds--;
            }
        }
    }

done:
    if (result == CVIPS_CHILD_FAILED_TO_START) *exit_status = -(errno ? errno : EIO);
    if (pid > 0) {
        // A child past its deadline or its output bound is killed; every child is reaped.
        // A child that closed its output but goes on running gets until the deadline.
        int status = 0;
        pid_t reaped = 0;
        while (result == CVIPS_CHILD_OK && (reaped = waitpid(pid, &status, WNOHANG)) == 0) {
            if (now_ms() >= deadline) {
                result = CVIPS_CHILD_TIMED_OUT;
                break;
            }
            struct timespec pause = {0, 2000000};
            nanosleep(&pause, NULL);
        }
        if (reaped <= 0) {
            if (result != CVIPS_CHILD_OK) kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        }
        *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    if (have_actions) posix_spawn_file_actions_destroy(&actions);
    if (have_attributes) posix_spawnattr_destroy(&attributes);
    int fds[] = {in_fd, out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (fds[i] >= 0) close(fds[i]);
    }
    if (result == CVIPS_CHILD_OK) {
        *output = buffer;
        *output_len = length;
    } else {
        free(buffer);
    }
    return result;
}
