// A scratch folder for tests that write files: a fresh one under the system's temporary folder
// (mkdtemp, so concurrent tests and ctest -j never share one), removed with everything in it
// when the TempDir goes out of scope. One helper for every test that needs a folder, rather
// than a copy in each.
#pragma once

#include <catch2/catch.hpp>

#include <stdlib.h>  // mkdtemp (POSIX)

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace fplab::test {

struct TempDir {
  std::filesystem::path path;

  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fplab-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the folder (nothing is created).
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes `text` to `name` inside the folder and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string f = file(name);
    std::ofstream out(f, std::ios::binary);
    out << text;
    REQUIRE(out.good());
    return f;
  }
  // The names of the entries directly inside the folder.
  std::set<std::string> entries() const {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.insert(e.path().filename().string());
    return out;
  }
};

}  // namespace fplab::test
