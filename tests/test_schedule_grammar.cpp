// Schedule text: canonical printing, parse(print(s)) == s for every preset and for random
// schedules, and one-line errors that point at the offending token.
#include <catch2/catch.hpp>

#include <random>

#include "sim/presets.hpp"
#include "sim/schedule.hpp"

using namespace fplab::sim;

namespace {

Schedule random_schedule(std::mt19937_64& g) {
  Schedule s;
  const int stages = 1 + static_cast<int>(g() % 5);
  for (int i = 0; i < stages; ++i) {
    Stage st;
    if (g() % 6 == 0) {
      st.shuffle = true;
    } else {
      st.grouping.kind = static_cast<Grouping::Kind>(g() % 4);
      if (st.grouping.kind != Grouping::Kind::all) st.grouping.size = 1 + static_cast<int64_t>(g() % 5000);
      st.reducer.kind = static_cast<Reducer::Kind>(g() % 14);
      if (st.reducer.kind == Reducer::Kind::fused) {
        st.reducer.fused_products = 1 + static_cast<int>(g() % 64);
        st.reducer.fused_fraction_bits = 1 + static_cast<int>(g() % 60);
        st.reducer.fused_input = static_cast<Reducer::Input>(g() % 8);
      }
    }
    s.stages.push_back(st);
  }
  return s;
}

// The same schedule with random white space around every token.
std::string with_random_spaces(const std::string& text, std::mt19937_64& g) {
  std::string out;
  for (char c : text) {
    if (c == ' ') continue;
    if (std::string("|:(),").find(c) != std::string::npos)
      out += std::string(g() % 3, ' ') + c + std::string(g() % 3, ' ');
    else
      out += c;
  }
  return out;
}

}  // namespace

TEST_CASE("schedule grammar: every preset parses, prints its expansion, and that text parses back to it") {
  for (const auto& preset : presets()) {
    INFO(preset.example);
    const Schedule s = parse_schedule(preset.example);
    const std::string text = to_string(s);
    CHECK(text != preset.example);  // presets print their expansion
    CHECK(parse_schedule(text) == s);
    CHECK(to_string(parse_schedule(text)) == text);
  }
}

TEST_CASE("schedule lists are cut at the commas outside parentheses, items trimmed") {
  using List = std::vector<std::string>;
  CHECK(split_schedule_list("numpy, cuda-naive-sum(256,64) ,contig(4):seq | all:fused(4,23,tf32)") ==
        List{"numpy", "cuda-naive-sum(256,64)", "contig(4):seq | all:fused(4,23,tf32)"});
  CHECK(split_schedule_list("seq,,rev") == List{"seq", "", "rev"});
  CHECK(split_schedule_list("") == List{""});
  CHECK(split_schedule_list("splitk(4") == List{"splitk(4"});  // left for the parser to refuse
  CHECK(split_schedule_list("a),b") == List{"a)", "b"});        // a stray ')' does not swallow the rest
  // Every item of a random list of presets and random schedules comes back whole.
  std::mt19937_64 g(7);
  List items;
  std::string text;
  for (int i = 0; i < 200; ++i) {
    items.push_back(i % 2 ? presets()[g() % presets().size()].example : to_string(random_schedule(g)));
    text += (i ? "," : "") + items.back();
  }
  CHECK(split_schedule_list(text) == items);
}

TEST_CASE("schedule grammar: 20000 seeded random schedules round-trip through text, with any spacing") {
  std::mt19937_64 g(20261122);
  for (int i = 0; i < 20000; ++i) {
    const Schedule s = random_schedule(g);
    const std::string text = to_string(s);
    INFO(text);
    REQUIRE(parse_schedule(text) == s);
    REQUIRE(parse_schedule(with_random_spaces(text, g)) == s);
  }
}

TEST_CASE("schedule grammar: fused(N,F,INPUT) names the tensor core's input format; without it, none") {
  CHECK(parse_schedule("all:fused(8,25)").stages[0].reducer.fused_input == Reducer::Input::none);
  CHECK(parse_schedule("all:fused(8,25,tf32)").stages[0].reducer.fused_input == Reducer::Input::tf32);
  CHECK(parse_schedule("all:fused(16, 25, bf16)").stages[0].reducer.fused_input == Reducer::Input::bf16);
  CHECK(to_string(parse_schedule("split(16):fused(32,13,e4m3) | all:seq")) == "split(16):fused(32,13,e4m3) | all:seq");
  CHECK(to_string(parse_schedule("all:fused(8,25)")) == "all:fused(8,25)");  // no ",none" printed
  CHECK_FALSE(parse_schedule("all:fused(8,25,tf32)") == parse_schedule("all:fused(8,25)"));
}

TEST_CASE("schedule grammar: canonical text has single spaces around '|' and no others") {
  const Schedule s = parse_schedule("  strided( 32 ) :seq|contig(8) : shfl_down |all:fused( 4 , 23 )  ");
  CHECK(to_string(s) == "strided(32):seq | contig(8):shfl_down | all:fused(4,23)");
}

TEST_CASE("schedule grammar: malformed schedules name the offending token and its position") {
  struct Case {
    const char* text;
    size_t position;  // 0-based offset of the offending token
  };
  const Case cases[] = {
      {"", 0},
      {"all:sqe", 4},
      {"foo:seq", 0},
      {"contig(0):seq", 7},
      {"contig(4)seq", 9},
      {"contig(4):seq |", 15},
      {"contig(4):seq | | all:seq", 16},
      {"strided(x):seq", 8},
      {"all:fused(0,23)", 10},
      {"all:fused(4)", 11},
      {"all:fused(8,25,fp32)", 15},
      {"all:fused(8,25,)", 15},
      {"all:fused(8,25,tf32", 19},
      {"all:seq all:seq", 8},
      {"all:", 4},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    try {
      parse_schedule(c.text);
      FAIL("accepted a malformed schedule");
    } catch (const ScheduleError& e) {
      CHECK(e.position == c.position);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      CHECK(std::string(e.what()).find("position " + std::to_string(c.position + 1)) != std::string::npos);
    }
  }
}

TEST_CASE("schedule grammar: presets with bad parameters are refused") {
  for (const char* bad : {"splitk(0)", "splitk(a)", "splitk(4,2)", "seq(3)", "cuda-naive-sum(100,2)", "systolic()"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_schedule(bad), ScheduleError);
  }
}

TEST_CASE("schedule grammar: nondeterminism and order independence are read off the stages") {
  CHECK(parse_schedule("splitk-atomic(4)").nondeterministic());
  CHECK(parse_schedule("permuted").nondeterministic());
  CHECK_FALSE(parse_schedule("splitk(4)").nondeterministic());
  CHECK(parse_schedule("shuffle | all:exact").order_independent());
  CHECK(parse_schedule("binned").order_independent());
  CHECK_FALSE(parse_schedule("contig(4):exact | all:exact").order_independent());
}
