// fplab serve: the teaching page on a local web server (cpp-httplib), loopback only by default.
// A server rather than WebAssembly: the page's numbers then come from the very code `fplab
// reduce` runs (MPFR-checked rounding, the schedule engine), which Debian's emscripten could not
// build (no MPFR/GMP for wasm); docs/teaching.md says more.
#include <httplib.h>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/teach_api.hpp"
#include "apps/teach_page.hpp"
#include "fp/format.hpp"
#include "sim/schedule.hpp"

namespace fplab::app {
namespace {

struct ServeArgs {
  std::string host = "127.0.0.1";
  int port = 8765;
  bool allow_remote = false;
};

bool loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

std::string content_type(std::string_view path) {
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  return "text/html; charset=utf-8";
}

int run_serve(const ServeArgs& args) {
  if (!loopback(args.host) && !args.allow_remote)
    throw UsageError("--host " + args.host +
                     " would let other machines reach the server; pass --allow-remote as well if that is meant");
  if (args.port < 0 || args.port > 65535) throw UsageError("--port must be from 0 to 65535");

  httplib::Server server;
  server.set_payload_max_length(kTeachMaxNumberChars + 64 * 1024);
  server.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                              {"Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:"},
                              {"Cache-Control", "no-store"}});
  size_t count = 0;
  const EmbeddedFile* files = teach_page_files(count);
  for (size_t i = 0; i < count; ++i) {
    const EmbeddedFile file = files[i];
    server.Get(std::string(file.path), [file](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(file.content), content_type(file.path));
    });
  }
  server.Get("/api/catalogue", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(teach_catalogue().dump(), "application/json");
  });
  server.Post("/api/explain", [](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json answer;
    try {
      answer = teach_explain(nlohmann::json::parse(req.body));
    } catch (const nlohmann::json::parse_error&) {
      res.status = 400;
      answer = {{"error", "the request is not JSON"}};
    } catch (const UsageError& e) {
      res.status = 400;
      answer = {{"error", one_line(e.what())}};
    } catch (const fp::FormatError& e) {
      res.status = 400;
      answer = {{"error", one_line(e.what())}};
    } catch (const sim::ScheduleError& e) {
      res.status = 400;
      answer = {{"error", one_line(e.what())}};
    } catch (const std::exception& e) {
      res.status = 500;
      answer = {{"error", "fplab could not answer: " + one_line(e.what())}};
    }
    res.set_content(answer.dump(), "application/json");
  });
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 413 ? "the request is too large: the page sums at most " +
                                                        std::to_string(kTeachMaxTerms) + " numbers"
                                                  : "no such page (status " + std::to_string(res.status) + ")";
    res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
  });

  const int port = args.port == 0 ? server.bind_to_any_port(args.host) : (server.bind_to_port(args.host, args.port) ? args.port : -1);
  if (port < 0) throw UsageError("cannot listen on " + args.host + ":" + std::to_string(args.port) + " (in use? try --port 0)");
  // Ctrl-C or SIGTERM stops the server cleanly (exit 0), even one that comes before it listens:
  // the signals are taken by a thread of their own (sigwait), which waits for the server to run
  // before stopping it (httplib's stop() does nothing to a server not yet listening).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // the server's threads inherit the mask
  std::atomic<bool> finished = false;
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    while (!server.is_running() && !finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server.stop();
  });
  const bool v6 = args.host.find(':') != std::string::npos;
  std::printf("fplab serve: open http://%s%s%s:%d/ in a browser (%s; Ctrl-C stops)\n", v6 ? "[" : "",
              args.host.c_str(), v6 ? "]" : "", port, loopback(args.host) ? "this machine only" : "reachable from other machines");
  std::fflush(stdout);
  server.listen_after_bind();
  finished = true;
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the stopper if no signal came (no-op otherwise)
  stopper.join();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the teaching page: type numbers, pick orders, watch each addition round");
  cmd->add_option("--host", args->host, "address to listen on (loopback unless --allow-remote)")->capture_default_str();
  cmd->add_option("--port", args->port, "port to listen on (0: any free port, printed)")->capture_default_str();
  cmd->add_flag("--allow-remote", args->allow_remote, "allow a --host other machines can reach");
  cmd->footer(
      "Examples:\n"
      "  fplab serve                 # then open http://127.0.0.1:8765/\n"
      "  fplab serve --port 0        # any free port; the address is printed\n"
      "  fplab serve    # a state to share: http://127.0.0.1:8765/#numbers=1e8+1+-1e8+1&format=bf16&orders=seq,pairwise");
  cmd->callback([&run, args] { run = [args] { return run_serve(*args); }; });
}

}  // namespace fplab::app
