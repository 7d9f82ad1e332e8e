// Tests that need another process of their own: this binary run again with
// one test selected and extra environment, its output collected.
#pragma once

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

extern char **environ;

namespace npurt_test {

struct ChildResult {
	int status = -1;
	bool timedOut = false;
	std::string output;
};

// Runs this binary again with only the tests matching `filter` and the
// extra environment `env` ("NAME=value"), collecting its output; kills it
// after timeoutMs.
inline ChildResult runChild(const std::string &filter, const std::vector<std::string> &env,
                            int timeoutMs = 300000)
{
	using Clock = std::chrono::steady_clock;
	std::string arg = "--gtest_filter=" + filter;
	std::vector<std::string> vars(env);
	for (char **e = environ; *e; e++)
		vars.emplace_back(*e);
	std::vector<char *> envp;
	for (auto &v : vars)
		envp.push_back(v.data());
	envp.push_back(nullptr);
	char name[] = "npurt_vm_tests";
	char *argv[] = {name, arg.data(), nullptr};
	ChildResult r;
	int fds[2];
	if (pipe(fds))
		return r;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execve("/proc/self/exe", argv, envp.data());
		_exit(127);
	}
	close(fds[1]);
	auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
	for (;;) {
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
		                                                                  Clock::now());
		pollfd pfd{fds[0], POLLIN, 0};
		if (left.count() <= 0 || poll(&pfd, 1, static_cast<int>(left.count())) == 0) {
			r.timedOut = true;
			kill(pid, SIGKILL);
			break;
		}
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		r.output.append(buf, static_cast<size_t>(n));
	}
	close(fds[0]);
	waitpid(pid, &r.status, 0);
	return r;
}

// One message of len bytes with descriptor fd (SCM_RIGHTS); 0 or -1.
inline int sendFd(int sock, int fd, const void *data, size_t len)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = {};
	iovec iov{const_cast<void *>(data), len};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctrl;
	msg.msg_controllen = sizeof(ctrl);
	cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == static_cast<ssize_t>(len) ? 0 : -1;
}

// One message of len bytes and the descriptor with it; -1 if none came.
inline int recvFd(int sock, void *data, size_t len)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = {};
	iovec iov{data, len};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctrl;
	msg.msg_controllen = sizeof(ctrl);
	if (recvmsg(sock, &msg, 0) != static_cast<ssize_t>(len))
		return -1;
	cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd = -1;
	std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

// Makes this process's calls of system call `nr` fail with `err` from now
// on, as a seccomp filter (a container's profile) does; false if the filter
// could not be installed.
inline bool refuseSyscall(long nr, int err)
{
	sock_filter filter[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1),
	        BPF_STMT(BPF_RET | BPF_K,
	                 SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	       syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

// A child's output, indented so that its GoogleTest summary lines do not
// read as this process's (tests/summarize.sh counts those).
inline std::string indented(const std::string &out)
{
	std::string r = "    | ";
	for (char c : out) {
		r += c;
		if (c == '\n')
			r += "    | ";
	}
	return r;
}

}  // namespace npurt_test
