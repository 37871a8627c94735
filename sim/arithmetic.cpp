#include "sim/arithmetic.hpp"

namespace fplab::sim {

std::string_view products_name(Products p) {
  switch (p) {
    case Products::exact:
      return "exact";
    case Products::rounded:
      return "rounded";
    case Products::fused:
      return "fused";
  }
  return "?";
}

Products parse_products(std::string_view text) {
  for (Products p : {Products::exact, Products::rounded, Products::fused})
    if (text == products_name(p)) return p;
  throw fp::FormatError("unknown products mode '" + std::string(text) + "' (known: exact, rounded, fused)");
}

bool Arithmetic::native_float() const {
  return format == fp::fp32() && mode == fp::Mode::rne && !flush_subnormals && !saturate;
}
bool Arithmetic::native_double() const {
  return format == fp::fp64() && mode == fp::Mode::rne && !flush_subnormals && !saturate;
}

std::string Arithmetic::to_string() const {
  std::string s = format.name + "/" + std::string(fp::mode_name(mode)) + "/" + std::string(products_name(products));
  if (flush_subnormals) s += "/ftz";
  if (saturate) s += "/sat";
  if (mode == fp::Mode::sr && sr_bits != 64) s += "/sr_bits=" + std::to_string(sr_bits);
  return s;
}

}  // namespace fplab::sim
