// The message of the util::FileError (models::DataError) a call throws, for the tests of file
// readers and writers (test_util, test_checkpoint_io, test_idx_dataset), which check what that
// message says: one definition instead of a copy in each.
#pragma once

#include <catch2/catch.hpp>

#include <exception>
#include <string>

#include "util/file_error.hpp"

namespace fplab::test {

// The message of the DataError `f` throws; fails the test if it throws nothing or another type.
template <class F>
std::string data_error(F&& f) {
  try {
    f();
  } catch (const util::FileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected a DataError, got: " << e.what());
  }
  FAIL("expected a DataError, nothing was thrown");
  return {};
}

}  // namespace fplab::test
