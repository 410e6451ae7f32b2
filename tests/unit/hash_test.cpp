// support::hash64 is XXH3-64: the published values, and the streaming form equal to the one-shot.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "support/hash.h"

using namespace sabre::support;

TEST(Hash, IsXxh3_64) {
  EXPECT_EQ(hash64(""), 0x2d06800538d394c2ull);
  EXPECT_EQ(hash64("a"), 0xe6c632b61e964e1full);
  EXPECT_EQ(hash64("abc"), 0x78af5f94892f3950ull);
  EXPECT_EQ(hex16(0x2d06800538d394c2ull), "2d06800538d394c2");
  EXPECT_EQ(hex16(0), "0000000000000000");
}

TEST(Hash, PiecesHashAsTheWhole) {
  std::mt19937 rng(3);
  std::string s(100000, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  Hasher h;
  for (size_t at = 0; at < s.size(); at += 777) h.update(std::string_view(s).substr(at, 777));
  EXPECT_EQ(h.digest(), hash64(s));
  EXPECT_EQ(Hasher().digest(), hash64(""));
}
