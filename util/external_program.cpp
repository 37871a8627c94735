#include "util/external_program.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

extern char** environ;

namespace fplab::util {
namespace {

constexpr size_t kOutputLimit = 64 * 1024;

// Closes both ends of a pipe and the spawn attributes whatever way run_program leaves.
struct SpawnResources {
  int pipe_fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  bool actions_made = false;
  ~SpawnResources() {
    for (int fd : pipe_fds)
      if (fd >= 0) ::close(fd);
    if (actions_made) posix_spawn_file_actions_destroy(&actions);
  }
};

}  // namespace

bool program_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string_view folders = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = folders.find(':');
    const std::string_view folder = folders.substr(0, colon);
    const std::string candidate = (folder.empty() ? std::string(".") : std::string(folder)) + "/" + program;
    struct stat info;
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return true;
    if (colon == std::string_view::npos) return false;
    folders.remove_prefix(colon + 1);
  }
}

ProgramResult run_program(const std::string& program, const std::vector<std::string>& arguments,
                          const std::string& working_folder) {
  SpawnResources r;
  if (::pipe2(r.pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error(program + ": cannot make a pipe: " + std::strerror(errno));
  if (posix_spawn_file_actions_init(&r.actions) != 0) throw std::runtime_error(program + ": cannot start");
  r.actions_made = true;
  posix_spawn_file_actions_addopen(&r.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&r.actions, r.pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&r.actions, r.pipe_fds[1], 2);
  if (!working_folder.empty()) posix_spawn_file_actions_addchdir_np(&r.actions, working_folder.c_str());

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, program.c_str(), &r.actions, nullptr, argv.data(), environ);
  if (spawned != 0) {
    if (spawned == ENOENT || spawned == EACCES) throw ProgramNotFound(program + ": not found on PATH");
    throw std::runtime_error(program + ": cannot start: " + std::strerror(spawned));
  }
  ::close(r.pipe_fds[1]);
  r.pipe_fds[1] = -1;

  ProgramResult result;
  char chunk[4096];
  for (;;) {
    const ssize_t got = ::read(r.pipe_fds[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (result.output.size() < kOutputLimit)
      result.output.append(chunk, std::min(static_cast<size_t>(got), kOutputLimit - result.output.size()));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(program + ": lost track of the process: " + std::strerror(errno));
  // glibc's posix_spawnp reports a failed exec (also a failed chdir) as exit status 127.
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !program_on_path(program))
    throw ProgramNotFound(program + ": not found on PATH");
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace fplab::util
