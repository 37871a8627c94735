// Schedule text: canonical printing, parse(print(s)) == s for every preset and for random
// schedules, and one-line errors that point at the offending token.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <random>

#include "sim/presets.hpp"
#include "sim/schedule.hpp"
#include "tests/random_perm.hpp"

using namespace fplab::sim;
namespace fp = fplab::fp;

namespace {

std::vector<Stage> random_stages(std::mt19937_64& g, int depth) {
  std::vector<Stage> out;
  const int stages = 1 + static_cast<int>(g() % 5);
  for (int i = 0; i < stages; ++i) {
    Stage st;
    const auto pick = g() % 12;
    if (pick == 0) {
      st.shuffle = true;
    } else if (pick == 1) {  // a lane permutation of 1..40 lanes
      st.perm = fplab::test::random_perm(g, 40);
    } else if (pick == 4) {
      st.cols = 1 + static_cast<int64_t>(g() % 50);
    } else if (pick == 2 && depth < 3) {
      st.body = 1 + static_cast<int64_t>(g() % 100);
      st.inner = random_stages(g, depth + 1);
    } else if (pick == 3 && depth < 3) {  // each(S)[...] and deal(P,B)[...] take deterministic stages only
      if (g() % 2) {
        st.each = 1 + static_cast<int64_t>(g() % 1000);
      } else {
        st.deal = 1 + static_cast<int64_t>(g() % 200);
        st.deal_block = 1 + static_cast<int64_t>(g() % 100);
      }
      do st.inner = random_stages(g, depth + 1);
      while (Schedule{st.inner}.nondeterministic());
    } else {
      st.grouping.kind = static_cast<Grouping::Kind>(g() % 4);
      if (st.grouping.kind != Grouping::Kind::all) st.grouping.size = 1 + static_cast<int64_t>(g() % 5000);
      st.reducer.kind = static_cast<Reducer::Kind>(g() % 16);  // seq ... torch_cascade, cub_reduce, fused
      if (st.reducer.kind == Reducer::Kind::torch_cascade) st.reducer.cascade_lanes = 1 + static_cast<int>(g() % 64);
      if (st.reducer.kind == Reducer::Kind::cub_reduce) {
        const int vector = 1 + static_cast<int>(g() % 4);
        st.reducer.cub = {32 * (1 + static_cast<int>(g() % 32)), vector * (1 + static_cast<int>(g() % 4)), vector,
                          1 + static_cast<int>(g() % 10000)};
      }
      if (st.reducer.kind == Reducer::Kind::fused) {
        st.reducer.fused_products = 1 + static_cast<int>(g() % 64);
        st.reducer.fused_fraction_bits = 1 + static_cast<int>(g() % 60);
        st.reducer.fused_input = static_cast<Reducer::Input>(g() % 13);  // none ... mxe2m1
      }
      if (g() % 4 == 0) st.format = std::array{fp::fp64(), fp::fp32(), fp::bf16(), fp::parse_format("e6m9")}[g() % 4];
    }
    out.push_back(st);
  }
  return out;
}

Schedule random_schedule(std::mt19937_64& g) { return {random_stages(g, 0)}; }

// The same schedule with random white space around every token.
std::string with_random_spaces(const std::string& text, std::mt19937_64& g) {
  std::string out;
  for (char c : text) {
    if (c == ' ') continue;
    if (std::string("|:(),[]@").find(c) != std::string::npos)
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
  CHECK(split_schedule_list("a),b") == List{"a)", "b"});       // a stray ')' does not swallow the rest
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
      {"perm(0,0)", 7},
      {"perm(0,2)", 5},
      {"perm()", 5},
      {"perm(1,0", 8},
      {"cols(0) | all:seq", 5},
      {"cols(3 | all:seq", 7},
      {"cols(3):seq", 7},
      {"body(0)[all:seq] | all:seq", 5},
      {"body(4)all:seq", 7},
      {"body(4)[] | all:seq", 8},
      {"body(4)[all:seq | all:seq", 25},
      {"body(4)[all:seq all:seq]", 16},
      {"all:seq] | all:seq", 7},
      {"all:seq@", 8},
      {"all:seq@fp99", 8},
      {"contig(2):tree@fp64@fp32 | all:seq", 19},
      {"perm(1,0)@fp64", 9},
      {"all:seq@fp32>", 13},
      {"all:seq@fp32>fp99", 13},
      {"all:kahan@fp32>fp16", 14},
      {"contig(2):fused(8,25)@fp32>bf16 | all:seq", 26},
      {"all:seq>fp16", 7},
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

TEST_CASE("schedule grammar: each(S)[...] prints canonically, is no plain stage, refuses noise inside") {
  const Schedule s = parse_schedule(" each( 784 ) [ contig(512) : seq ] | all : atomic ");
  CHECK(to_string(s) == "each(784)[contig(512):seq] | all:atomic");
  REQUIRE(s.stages.size() == 2);
  CHECK(s.stages[0].each == 784);
  CHECK(s.stages[0].body == 0);
  CHECK_FALSE(s.stages[0].reduces());
  REQUIRE(s.stages[0].inner.size() == 1);
  CHECK(s.stages[0].inner[0].grouping == Grouping{Grouping::Kind::contig, 512});
  CHECK_FALSE(s.plain());
  CHECK(s.nondeterministic());  // the atomic outside
  CHECK(to_string(parse_schedule("each(4)[body(2)[all:seq] | each(3)[all:tree]] | all:seq")) ==
        "each(4)[body(2)[all:seq] | each(3)[all:tree]] | all:seq");
  for (const char* noisy : {"each(4)[all:atomic] | all:seq", "each(4)[shuffle | all:seq] | all:seq",
                            "each(8)[body(2)[all:atomic]] | all:seq"}) {
    INFO(noisy);
    CHECK_THROWS_WITH(parse_schedule(noisy), Catch::Contains("each(S)[...] takes deterministic stages"));
  }
  CHECK_THROWS_WITH(parse_schedule("each(0)[all:seq] | all:seq"), Catch::Contains("run length S"));
  CHECK_THROWS_WITH(parse_schedule("each(4)[] | all:seq"), Catch::Contains("expected a stage inside each(S)[...]"));
  CHECK_THROWS_WITH(parse_schedule("each(4)[all:seq | all:seq"), Catch::Contains("each(S)[ is not closed by ']'"));
}

TEST_CASE("schedule grammar: deal(P,B)[...] prints canonically, is no plain stage, refuses noise inside") {
  const Schedule s = parse_schedule(" deal( 90 , 64 ) [ all : fused(tc-h100-tf32-rna) ] | cols(89) | all:seq ");
  CHECK(to_string(s) == "deal(90,64)[all:fused(8,25,tf32rna)] | cols(89) | all:seq");
  REQUIRE(s.stages.size() == 3);
  CHECK(s.stages[0].deal == 90);
  CHECK(s.stages[0].deal_block == 64);
  CHECK(s.stages[0].nests());
  CHECK_FALSE(s.stages[0].reduces());
  CHECK_FALSE(s.plain());
  CHECK_FALSE(s.nondeterministic());
  CHECK(parse_schedule(to_string(s)) == s);
  CHECK(to_string(parse_schedule("deal(3,4)[each(2)[all:seq] | all:tree] | all:atomic")) ==
        "deal(3,4)[each(2)[all:seq] | all:tree] | all:atomic");
  CHECK_THROWS_WITH(parse_schedule("deal(4,2)[all:atomic] | all:seq"),
                    Catch::Contains("deal(P,B)[...] takes deterministic stages only") && Catch::Contains("every hand"));
  CHECK_THROWS_WITH(parse_schedule("deal(0,2)[all:seq] | all:seq"), Catch::Contains("deal hands P"));
  CHECK_THROWS_WITH(parse_schedule("deal(4)[all:seq] | all:seq"), Catch::Contains("expected ','"));
  CHECK_THROWS_WITH(parse_schedule("deal(4,0)[all:seq] | all:seq"), Catch::Contains("deal block length B"));
  CHECK_THROWS_WITH(parse_schedule("deal(4,2)[] | all:seq"), Catch::Contains("expected a stage inside deal(P,B)[...]"));
}

TEST_CASE("schedule grammar: perm, body(M)[...] and @FORMAT print canonically and read their parts") {
  const Schedule s = parse_schedule(" body( 32 ) [ perm( 1 , 0 ) | contig(2) : seq @ fp64 ] | all : seq@e5m10 ");
  CHECK(to_string(s) == "body(32)[perm(1,0) | contig(2):seq@fp64] | all:seq@fp16");
  REQUIRE(s.stages.size() == 2);
  CHECK(s.stages[0].body == 32);
  REQUIRE(s.stages[0].inner.size() == 2);
  CHECK(s.stages[0].inner[0].perm == std::vector<int64_t>{1, 0});
  CHECK(s.stages[0].inner[1].format == fp::fp64());
  CHECK(s.stages[1].format == fp::fp16());
  CHECK(s.has_stage_formats());
  CHECK_FALSE(s.plain());
  CHECK(parse_schedule("perm(0) | all:seq").plain() == false);
  CHECK(parse_schedule("contig(4):seq | all:tree").plain());
  CHECK_FALSE(parse_schedule("body(4)[all:seq] | all:seq").has_stage_formats());
  // An atomic inside a body is nondeterministic too; an exact sum held in another format is not
  // order independent (it is rounded twice).
  CHECK(parse_schedule("body(4)[all:atomic] | all:seq").nondeterministic());
  CHECK_FALSE(parse_schedule("all:exact@fp64").order_independent());
  CHECK_FALSE(parse_schedule("all:seq@fp64") == parse_schedule("all:seq"));
  CHECK(to_string(parse_schedule("openblas-sdot")) ==
        "body(32)[body(64)[strided(64):seq | perm(0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15) | contig(2):seq] | "
        "strided(32):seq | strided(8):seq | strided(4):seq | all:tree] | all:seq@fp64");
}

TEST_CASE("schedule grammar: @FORMAT>HOLD prints canonically and marks the held sequential reducers") {
  const Schedule s = parse_schedule("contig(8192):numpy_pairwise@fp32 | all:seq @ fp32 > e5m10");
  CHECK(to_string(s) == "contig(8192):numpy_pairwise@fp32 | all:seq@fp32>fp16");
  CHECK(parse_schedule("numpy-2.2-fp16") == s);
  CHECK(to_string(parse_schedule("numpy-fp16")) == "all:numpy_pairwise@fp32");
  REQUIRE(s.stages.size() == 2);
  CHECK_FALSE(s.stages[0].hold);
  CHECK(s.stages[1].hold == fp::fp16());
  CHECK(s.has_stage_formats());
  CHECK_FALSE(s.plain());
  CHECK_FALSE(s == parse_schedule("contig(8192):numpy_pairwise@fp32 | all:seq@fp32"));
  for (const char* sequential :
       {"all:seq@fp32>fp16", "all:rev@fp32>fp16", "all:atomic@fp32>fp16", "all:ring@fp32>fp16"})
    CHECK(parse_schedule(sequential).stages[0].sequential_from_zero());
  for (const char* other :
       {"all:tree@fp32>fp16", "all:shfl_down@fp32>fp16", "all:numpy_pairwise@fp32>fp16", "all:seq@fp32"})
    CHECK_FALSE(parse_schedule(other).stages[0].sequential_from_zero());
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
