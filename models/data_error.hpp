// A problem with a dataset file or a checkpoint is a file error (util/file_error.hpp): one line
// that starts with the path. models/ names it DataError where it reads data.
#pragma once

#include "util/file_error.hpp"

namespace fplab::models {

using DataError = util::FileError;

}  // namespace fplab::models
