// util/: external programs started without a shell, files they make published only when
// complete, safe file-name stems.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "util/whole_file.hpp"
#include "util/external_program.hpp"
#include "util/file_name.hpp"
#include "util/rendered_file.hpp"
#include "tests/data_error.hpp"
#include "tests/temp_dir.hpp"

using namespace fplab::util;
using fplab::test::data_error;
using fplab::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The smallest complete PNG: signature, IHDR, IDAT, IEND (CRCs are not checked here).
std::string tiny_png() {
  std::string png = "\x89PNG\r\n\x1a\n";
  png += std::string("\0\0\0\x0dIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90\x77\x53\xde", 25);
  png += std::string("\0\0\0\x0cIDAT\x08\xd7\x63\xf8\xcf\xc0\0\0\x03\x01\x01\0\x18\xdd\x8d\xb0", 24);
  png += std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  return png;
}

}  // namespace

TEST_CASE("run_program: arguments reach the program as they are, no shell reads them") {
  TempDir dir;
  const std::string hostile = "x';touch INJECTED;'$(touch INJECTED2)`touch INJECTED3`";
  const ProgramResult r = run_program("printf", {"%s|", hostile, "two words"}, dir.path.string());
  CHECK(r.exit_status == 0);
  CHECK(r.output == hostile + "|two words|");
  CHECK(dir.entries().empty());
  CHECK(run_program("false", {}).exit_status == 1);
  CHECK_THROWS_AS(run_program("fplab-no-such-program", {}), ProgramNotFound);
  CHECK(program_on_path("printf"));
  CHECK_FALSE(program_on_path("fplab-no-such-program"));
}

TEST_CASE("render_to: publishes only a complete file, leaves nothing behind otherwise") {
  TempDir dir;
  const std::string target = (dir.path / "figure.png").string();
  // A "renderer" that copies its input: whatever we hand it is what it "draws".
  auto copy_of = [](const std::string& bytes) {
    return RenderJob{"cp", {"in.bin", "figure.png"}, {{"in.bin", bytes}}, "figure.png", "coreutils"};
  };
  render_to(target, copy_of(tiny_png()));
  CHECK(read(target) == tiny_png());
  CHECK(dir.entries() == std::set<std::string>{"figure.png"});

  // Exit 0 but cut short (a full disk): refused, the old figure stays.
  const std::string cut = tiny_png().substr(0, 40);
  CHECK_THROWS_WITH(render_to(target, copy_of(cut)), Catch::Contains("incomplete file"));
  CHECK(read(target) == tiny_png());
  CHECK(dir.entries() == std::set<std::string>{"figure.png"});

  // The program fails: its first line of complaint, one line.
  CHECK_THROWS_WITH(render_to(target, RenderJob{"cp", {"missing", "figure.png"}, {}, "figure.png", ""}),
                    Catch::StartsWith(target + ": cp failed: ") && !Catch::Contains("\n"));
  CHECK_THROWS_WITH(render_to(target, RenderJob{"fplab-no-such-program", {}, {}, "figure.png", "apt-get install it"}),
                    Catch::Contains("needs the program 'fplab-no-such-program' (apt-get install it)"));
  CHECK(dir.entries() == std::set<std::string>{"figure.png"});
  CHECK_THROWS_WITH(render_to((dir.path / "no-folder" / "f.png").string(), copy_of(tiny_png())),
                    Catch::Contains("cannot write"));
}

TEST_CASE("looks_complete: each format's ending") {
  CHECK(looks_complete("a.png", tiny_png()));
  CHECK_FALSE(looks_complete("a.png", tiny_png().substr(0, tiny_png().size() - 1)));
  CHECK(looks_complete("a.svg", "<?xml?>\n<svg>\n</svg>\n"));
  CHECK_FALSE(looks_complete("a.svg", "<?xml?>\n<svg>\n<g>"));
  CHECK(looks_complete("a.pdf", "%PDF-1.5\n...\n%%EOF\n"));
  CHECK_FALSE(looks_complete("a.pdf", "%PDF-1.5\n..."));
  CHECK_FALSE(looks_complete("a.dat", ""));
}

TEST_CASE("remove_interrupted_renders: only fplab's own leftovers") {
  TempDir dir;
  fs::create_directory(dir.path / ".fplab-render-abc123");
  std::ofstream(dir.path / ".fplab-render-abc123" / "figure.png") << "x";
  std::ofstream(dir.path / ".replica.ckpt.tmp.77.0") << "x";
  std::ofstream(dir.path / "replica.ckpt") << "x";
  std::ofstream(dir.path / ".hidden") << "x";
  CHECK(remove_interrupted_renders(dir.path.string()) == 2);
  CHECK(dir.entries() == std::set<std::string>{"replica.ckpt", ".hidden"});
}

TEST_CASE("safe_file_stem: plain names unchanged, anything else made safe and kept distinct") {
  CHECK(safe_file_stem("h100") == "h100");
  CHECK(safe_file_stem("quick") == "quick");
  CHECK(safe_file_stem("noise_sources-v2.1") == "noise_sources-v2.1");
  std::set<std::string> seen;
  for (const std::string& text :
       std::vector<std::string>{"../../etc/passwd", "..", ".", "", "/", "a/b", "a b", "x';touch y;'", "new\nline",
                                ".hidden", "profiles/h100.toml", "other/h100.toml", std::string(300, 'a'), "é"}) {
    const std::string stem = safe_file_stem(text);
    INFO(text << " -> " << stem);
    CHECK(!stem.empty());
    CHECK(stem.size() <= 64);
    CHECK(stem != ".");
    CHECK(stem != "..");
    CHECK(stem.front() != '.');
    CHECK(stem.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
          std::string::npos);
    CHECK(seen.insert(stem).second);  // distinct texts, distinct stems
  }
  CHECK(safe_file_stem("profiles/h100.toml").rfind("h100-", 0) == 0);  // readable
}

TEST_CASE("atomic write: replaces the file whole, leaves no temporary, reports failures naming the path") {
  TempDir dir;
  const std::string path = dir.file("weights.bin");
  write_file_atomically(path, std::string_view("first version"));
  write_file_atomically(path, std::string_view("second"));
  std::ifstream in(path, std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "second");
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    ++files;
    CHECK(entry.path().filename() == "weights.bin");
  }
  CHECK(files == 1);
  const std::string nowhere = dir.file("missing/weights.bin");
  const std::string message = data_error([&] { write_file_atomically(nowhere, std::string_view("x")); });
  CHECK(message == nowhere + ": cannot write: No such file or directory");
  // A folder in the way of the file: the rename fails and the temporary is removed.
  fs::create_directory(dir.file("taken"));
  fs::create_directory(dir.file("taken/sub"));
  CHECK(data_error([&] { write_file_atomically(dir.file("taken"), std::string_view("x")); }).find("cannot write") !=
        std::string::npos);
  files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 2);
}
