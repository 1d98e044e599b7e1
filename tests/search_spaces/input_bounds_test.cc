// Hostile input to the spec readers: every file or text out of bounds is
// refused with a one-line message naming the line (or byte) and the problem,
// and never reaches a recursion that could exhaust the stack (docs/hardening.md).
#include "search_spaces/input_bounds.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"

namespace frontier {
namespace {

constexpr char kBoundsHead[] = R"(name: t
baseline:
  arch:
    stem: {kind: conv3x3, width: 16, stride: 2, depth: 1}
    stages:
      - {block: basic, width: 16, depth: 1}
objectives: [{metric: val_accuracy}]
)";

std::string SpaceErrorOf(const std::string& yaml) {
  try {
    ParseSearchSpace(yaml, "hostile.yaml");
  } catch (const SpaceError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string SpecErrorOf(const std::string& text) {
  try {
    ParseTrialSpecText(text);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(InputBoundsTest, TheHeadIsAValidSpace) { EXPECT_EQ(SpaceErrorOf(kBoundsHead), "(accepted)"); }

// The two files of issue 14 that killed frontier-server: an anchor holding
// an alias of itself (a cycle every recursive walk followed forever).
TEST(InputBoundsTest, AnAliasInsideItsOwnAnchorIsRefused) {
  EXPECT_EQ(SpaceErrorOf("a: &a [*a]\n"), "hostile.yaml:1: an alias refers to a node that contains it");
  EXPECT_EQ(SpaceErrorOf("name: x\nbaseline: &b {arch: *b}\n"),
            "hostile.yaml:2: an alias refers to a node that contains it");
  EXPECT_EQ(SpaceErrorOf("&a {x: [{y: *a}]}\n"), "hostile.yaml:1: an alias refers to a node that contains it");
}

TEST(InputBoundsTest, AnAliasOutsideItsAnchorIsStillAccepted) {
  EXPECT_EQ(SpaceErrorOf(std::string(kBoundsHead) + "description: &d hello\nrepeats: 2\n"), "(accepted)");
  const SearchSpace space = ParseSearchSpace(
      std::string(kBoundsHead) + "space:\n  stem.width: &w [16, 24]\n  stages[0].width: *w\n",
      "aliases.yaml");
  ASSERT_EQ(space.dimensions.size(), 2u);
  EXPECT_EQ(space.dimensions[1].choices, space.dimensions[0].choices);
}

// Nine anchors of ten aliases each expand to 10^9 values; the message names
// the line of the values the expansion repeats.
TEST(InputBoundsTest, AChainOfAnchorsThatMultipliesTheDocumentIsRefused) {
  std::string yaml =
      std::string(kBoundsHead) + "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string alias = "*a" + std::to_string(i - 1);
    yaml += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += (k ? ", " : "") + alias;
    yaml += "]\n";
  }
  EXPECT_EQ(SpaceErrorOf(yaml), "hostile.yaml:8: more than 100000 values with every alias expanded");
  // Few values but long ones: the text multiplies instead.
  std::string text = std::string(kBoundsHead) + "x0: &t " + std::string(100000, 'x') + "\nx1: [";
  for (int k = 0; k < 20; ++k) text += (k ? ", " : "") + std::string("*t");
  EXPECT_EQ(SpaceErrorOf(text + "]\n"), "hostile.yaml:8: more than 1048576 bytes of text with every alias expanded");
}

// A megabyte of '[' is refused by the scan of the bytes, before yaml-cpp
// (which takes seconds over it) sees the text: the message names byte 64.
TEST(InputBoundsTest, AMegabyteOfOpeningBracketsIsRefusedByTheByteScan) {
  EXPECT_EQ(SpaceErrorOf(std::string(kMaxSpaceBytes, '[')), "hostile.yaml:1: byte 64: nested deeper than 64 levels");
  EXPECT_EQ(SpaceErrorOf(std::string(kMaxSpaceBytes + 1, '[')),
            "hostile.yaml: a search-space file of 1048577 bytes; the limit is 1 MiB");
  std::string maps;
  for (int i = 0; i < 70; ++i) maps += "{a: ";
  EXPECT_EQ(SpaceErrorOf(maps), "hostile.yaml:1: byte 256: nested deeper than 64 levels");
}

TEST(InputBoundsTest, DeepBlockNestingIsRefused) {
  std::string dashes;  // "- - - ... x": a list in a list in a list, without brackets
  for (int i = 0; i < 100; ++i) dashes += "- ";
  EXPECT_EQ(SpaceErrorOf(dashes + "x\n"), "hostile.yaml:1: nested deeper than 64 levels");
  std::string block;  // a mapping per line, each indented one more
  for (int i = 0; i < 100; ++i) block += std::string(i, ' ') + "a:\n";
  EXPECT_EQ(SpaceErrorOf(block + std::string(100, ' ') + "x\n"), "hostile.yaml:64: nested deeper than 64 levels");
  // yaml-cpp's own guard answers first for thousands of levels.
  std::string deeper;
  for (int i = 0; i < 5000; ++i) deeper += "- ";
  EXPECT_EQ(SpaceErrorOf(deeper + "x\n"), "hostile.yaml:1: nested deeper than 64 levels");
}

TEST(InputBoundsTest, NonUtf8AndNulBytesAreRefusedWithTheirByteOffset) {
  EXPECT_EQ(SpaceErrorOf("name: t\ndescription: caf\xe9\n"),
            "hostile.yaml:2: byte 24: invalid UTF-8 (byte 0xe9); the text must be UTF-8");
  EXPECT_EQ(SpaceErrorOf(std::string("name: t\0x\n", 10)),
            "hostile.yaml:1: byte 7: NUL byte; the text must not contain NUL");
  EXPECT_EQ(SpaceErrorOf("\x89PNG\r\n\x1a\n"), "hostile.yaml:1: byte 0: invalid UTF-8 (byte 0x89); the text must be UTF-8");
  // Valid UTF-8 of every length is fine.
  EXPECT_EQ(
      SpaceErrorOf(std::string(kBoundsHead) + "description: \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\n"),
      "(accepted)");
}

TEST(InputBoundsTest, EncodingFaultsOfEveryKind) {
  const auto fault = [](const std::string& text) {
    std::optional<InputFault> f = FindEncodingFault(text);
    return f ? Describe(*f) : "(none)";
  };
  EXPECT_EQ(fault("ok \xc3\xa9"), "(none)");
  EXPECT_EQ(fault("a\n\x80"), "line 2 (byte 2): invalid UTF-8 (byte 0x80); the text must be UTF-8");  // stray continuation
  EXPECT_EQ(fault("\xc0\xaf"), "line 1 (byte 0): invalid UTF-8 (byte 0xc0); the text must be UTF-8");  // overlong '/'
  EXPECT_EQ(fault("\xe0\x80\xaf"), "line 1 (byte 0): invalid UTF-8 (byte 0xe0); the text must be UTF-8");  // overlong
  EXPECT_EQ(fault("\xed\xa0\x80"), "line 1 (byte 0): invalid UTF-8 (byte 0xed); the text must be UTF-8");  // surrogate
  EXPECT_EQ(fault("\xf4\x90\x80\x80"), "line 1 (byte 0): invalid UTF-8 (byte 0xf4); the text must be UTF-8");  // > U+10FFFF
  EXPECT_EQ(fault("ab\xe2\x82"), "line 1 (byte 2): invalid UTF-8 (byte 0xe2); the text must be UTF-8");  // truncated
  EXPECT_EQ(fault(std::string("\0", 1)), "line 1 (byte 0): NUL byte; the text must not contain NUL");
}

TEST(InputBoundsTest, NumbersOutOfRangeAreRefused) {
  const std::string head = kBoundsHead;
  EXPECT_EQ(SpaceErrorOf(head + "repeats: 99999999999999999999999\n"),
            "hostile.yaml:8: integer 99999999999999999999999 is out of range (at most 9223372036854775807 in "
            "magnitude)");
  EXPECT_EQ(SpaceErrorOf(head + "parity: {margin: 1e999}\n"), "hostile.yaml:8: number 1e999 is out of range");
  EXPECT_EQ(SpaceErrorOf(head + "repeats: " + std::string(100000, '9') + "\n"),
            "hostile.yaml:8: number of 100000 characters; at most 64");
  // Quoted, the same text is a string, refused as such where a number belongs.
  EXPECT_EQ(SpaceErrorOf(head + "repeats: '1e999'\n"), "hostile.yaml:8: repeats: expected an integer, got '1e999'");
}

TEST(InputBoundsTest, MessagesQuotingHugeInputsStayShortAndOnOneLine) {
  const std::string name(500000, 'a');
  const std::string message = SpaceErrorOf(std::string(kBoundsHead).replace(6, 1, name));
  EXPECT_LT(message.size(), 1200u);
  EXPECT_NE(message.find("aaa... (5000"), std::string::npos) << message;
  const std::string key = "\"" + std::string(1000, 'k') + "\"";
  EXPECT_EQ(SpaceErrorOf(std::string(kBoundsHead) + "space:\n  " + key + ": [1]\n"),
            "hostile.yaml:9: a key of 1000 bytes; at most 256");
  const std::string multiline = SpaceErrorOf(std::string(kBoundsHead) + "\"bad\\nkey\": 1\n");
  EXPECT_EQ(multiline.find('\n'), std::string::npos) << multiline;
  EXPECT_EQ(Abbreviated("abc\xc3\xa9" "def", 4), "abc... (8 bytes)");  // never half a character
  // What a message quotes is UTF-8, whatever it quotes: JSON and protobuf strings refuse anything else.
  EXPECT_EQ(Abbreviated("a\xff" "b\xc3\xa9\xe2\x96\x88\xe2\x96", 100), "a?b\xc3\xa9\xe2\x96\x88??");
  EXPECT_EQ(Abbreviated("\xed\xa0\x80\xc0\xaf", 100), "?????");  // a surrogate, an overlong '/'
}

TEST(InputBoundsTest, TrialSpecTextOutOfBoundsIsRefused) {
  EXPECT_EQ(SpecErrorOf(std::string(100000, '[') + std::string(100000, ']')),
            "line 1 (byte 64): nested deeper than 64 levels");
  EXPECT_EQ(SpecErrorOf("{\"schema\": 1, \"trial_id\": \"x\xff\"}"),
            "line 1 (byte 28): invalid UTF-8 (byte 0xff); the text must be UTF-8");
  EXPECT_EQ(SpecErrorOf(std::string(kMaxTrialSpecBytes + 1, ' ')),
            "line 1 (byte 1048576): 1048577 bytes; the limit is 1048576");
  const std::string overflow = SpecErrorOf("{\"seed\": 1e999}");
  EXPECT_NE(overflow.find("number overflow"), std::string::npos) << overflow;
  EXPECT_EQ(SpecErrorOf("{\n\"schema\": 1,\n  \"arch\": }").rfind("line 3 (byte 25): not valid JSON", 0), 0u);
  // Brackets inside strings do not count.
  EXPECT_EQ(SpecErrorOf("{\"trial_id\": \"" + std::string(1000, '[') + "\"}"), "arch: missing");
  // An unsigned seed beyond int64 is out of range, not wrapped to a negative.
  EXPECT_EQ(SpecErrorOf(R"({"seed": 18446744073709551615, "arch": {"stages": [{}]}})"),
            "seed: must be in [0, 9223372036854775807], got 18446744073709551615");
}

TEST(InputBoundsTest, JsonNestingCountsBracketsOutsideStringsOnly) {
  EXPECT_FALSE(FindNestingFault("{\"a\": \"[[[[[[\\\"[[[[\"}", 2, true));
  EXPECT_TRUE(FindNestingFault("{\"a\": \"[[[[[[\\\"[[[[\"}", 2, false));
  EXPECT_TRUE(FindNestingFault("[[[]]]", 2, true));
  EXPECT_FALSE(FindNestingFault("[[]][[]]", 2, true));
}

}  // namespace
}  // namespace frontier
