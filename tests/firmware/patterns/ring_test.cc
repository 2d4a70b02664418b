#include "firmware/patterns/ring.h"

#include "gtest/gtest.h"

namespace cclo::firmware::patterns {
namespace {

TEST(RingTest, Neighbours) {
  EXPECT_EQ(RingRight(0, 4), 1u);
  EXPECT_EQ(RingRight(3, 4), 0u);
  EXPECT_EQ(RingLeft(0, 4), 3u);
  EXPECT_EQ(RingLeft(2, 4), 1u);
  EXPECT_EQ(RingRight(0, 1), 0u);
  EXPECT_EQ(RingLeft(0, 1), 0u);
}

TEST(RingTest, ShiftsWrapBothWays) {
  EXPECT_EQ(RingRank(1, -3, 5), 3u);
  EXPECT_EQ(RingRank(1, -13, 5), 3u);
  EXPECT_EQ(RingRank(4, 12, 5), 1u);
  EXPECT_EQ(RingRank(2, 0, 5), 2u);
  for (uint32_t size = 1; size <= 13; ++size) {
    for (uint32_t rank = 0; rank < size; ++rank) {
      EXPECT_EQ(RingLeft(RingRight(rank, size), size), rank);
      EXPECT_EQ(RingRank(rank, -int64_t{size}, size), rank);
    }
  }
}

TEST(RingTest, ChunksOfUnevenCount) {
  // 10 elements in 4 chunks: 3, 3, 2, 2.
  EXPECT_EQ(RingChunk(10, 4, 0), (Chunk{0, 3}));
  EXPECT_EQ(RingChunk(10, 4, 1), (Chunk{3, 3}));
  EXPECT_EQ(RingChunk(10, 4, 2), (Chunk{6, 2}));
  EXPECT_EQ(RingChunk(10, 4, 3), (Chunk{8, 2}));
  // Fewer elements than chunks: the tail chunks are empty.
  EXPECT_EQ(RingChunk(2, 5, 1), (Chunk{1, 1}));
  EXPECT_EQ(RingChunk(2, 5, 4), (Chunk{2, 0}));
  EXPECT_EQ(RingChunk(0, 3, 2), (Chunk{0, 0}));
  EXPECT_EQ(RingChunk(7, 1, 0), (Chunk{0, 7}));
}

TEST(RingTest, ChunksTileTheBuffer) {
  for (uint64_t count : {0, 1, 7, 12, 13, 1000, 65537}) {
    for (uint32_t parts = 1; parts <= 13; ++parts) {
      uint64_t next = 0;
      for (uint32_t i = 0; i < parts; ++i) {
        const Chunk chunk = RingChunk(count, parts, i);
        EXPECT_EQ(chunk.offset, next) << count << "/" << parts << " chunk " << i;
        EXPECT_EQ(chunk.count, count / parts + (i < count % parts ? 1 : 0));
        next += chunk.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

}  // namespace
}  // namespace cclo::firmware::patterns
