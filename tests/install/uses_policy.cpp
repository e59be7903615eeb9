// DeepSeek's README example through an installed eplb: exit 0 when the placement is the
// reference's, 1 (printing it) otherwise.
#include <cstdio>
#include <vector>

#include "eplb/policy/deepseek.h"

int main() {
  eplb::LoadMatrix load(2, 12);
  load << 90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,  //
      20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27;
  auto placement = eplb::RebalanceDeepSeek(load, /*num_replicas=*/16, /*num_groups=*/4,
                                           /*num_nodes=*/2, /*num_gpus=*/8);
  if (!placement.ok()) {
    std::fprintf(stderr, "%s\n", placement.status().message().c_str());
    return 1;
  }
  const std::vector<std::vector<int>> expected = {
      {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
      {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}};
  int wrong = 0;
  for (int l = 0; l < 2; ++l) {
    const auto row = placement->phy2log(l);
    for (int s = 0; s < 16; ++s) {
      std::printf("%d%c", row[s], s == 15 ? '\n' : ',');
      wrong += row[s] != expected[l][s];
    }
  }
  return wrong == 0 ? 0 : 1;
}
