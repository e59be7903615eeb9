// The MPI glue of device runs, run as 3 processes by mpirun (ctest starts it so): the gate's
// minimum, the NCCL id's broadcast and the gathering of every process's transfers to rank 0.
#include "mpi_session.h"

#include <gtest/gtest.h>

namespace eplb::device::mpi {
namespace {

TEST(MpiSession, ProcessesKnowEachOther) {
  ASSERT_TRUE(Initialized());
  EXPECT_EQ(Size(), 3) << "run under mpirun -np 3";
  EXPECT_GE(Rank(), 0);
  EXPECT_LT(Rank(), Size());
  EXPECT_GE(LocalRank(), 0);
}

TEST(MpiSession, AllMinIsTheGatesMinimum) {
  EXPECT_EQ(AllMin(10 + Rank()), 10);
  EXPECT_EQ(AllMin(Rank() == 1 ? -1 : 5), -1);  // one failed process stops them all
}

TEST(MpiSession, BroadcastCarriesRankZerosBytes) {
  char id[128] = {};
  if (Rank() == 0) {
    for (int i = 0; i < 128; ++i) id[i] = static_cast<char>(i * 7);
  }
  Broadcast(id, sizeof(id), 0);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(id[i], static_cast<char>(i * 7));
}

TEST(MpiSession, RankZeroGathersEveryTransfer) {
  std::vector<TransferRecord> mine;
  for (int i = 0; i <= Rank(); ++i) {  // rank r measured r + 1 transfers
    mine.push_back({i, 100 * Rank() + i, Rank(), (Rank() + 1) % Size(), 4096, LinkClass::kNvlink,
                    0.5 * i, 0.5 * i + 0.25});
  }
  const auto all = GatherTransfers(mine);
  if (Rank() != 0) {
    EXPECT_EQ(all.size(), mine.size());
    return;
  }
  ASSERT_EQ(all.size(), 6u);  // 1 + 2 + 3
  int from_two = 0;
  for (const TransferRecord& t : all) {
    EXPECT_EQ(t.expert, 100 * t.src_rank + t.layer);
    EXPECT_EQ(t.bytes, 4096);
    EXPECT_DOUBLE_EQ(t.end_s - t.start_s, 0.25);
    from_two += t.src_rank == 2;
  }
  EXPECT_EQ(from_two, 3);
}

}  // namespace
}  // namespace eplb::device::mpi

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!eplb::device::mpi::Init().ok()) return 1;
  // Only rank 0 prints; every rank's result decides the exit code mpirun returns.
  if (eplb::device::mpi::Rank() != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  return RUN_ALL_TESTS();
}
