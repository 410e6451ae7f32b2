#include <gtest/gtest.h>

#include "ir/dim.h"

using sabre::ir::Dim;

TEST(Dim, ArithmeticKeepsPolynomialsExact) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  Dim bs = b * s;
  EXPECT_EQ(bs.str(), "batch*seq");
  EXPECT_EQ((bs * Dim(768)).divide(Dim(768))->str(), "batch*seq");
  EXPECT_EQ((bs * Dim(768)).divide(b * Dim(12))->str(), "64*seq");
  EXPECT_FALSE(bs.divide(Dim(5)).has_value());
  EXPECT_EQ((s + Dim(1)).str(), "seq+1");
  EXPECT_EQ((s + Dim(1) - s).value(), 1);
  EXPECT_EQ(*(bs + Dim(3)).evaluate({{"batch", 2}, {"seq", 5}}), 13);
  EXPECT_FALSE(bs.evaluate({{"batch", 2}}).has_value());
}

TEST(Dim, TextRoundTrips) {
  for (const char* t : {"768", "batch", "batch*seq", "seq+1", "2*batch*seq", "-3", "past+seq"}) {
    auto d = Dim::parse(t);
    ASSERT_TRUE(d.has_value()) << t;
    EXPECT_EQ(Dim::parse(d->str()).value(), *d) << t;
  }
  EXPECT_FALSE(Dim::parse("batch**").has_value());
  EXPECT_FALSE(Dim::parse("").has_value());
}
