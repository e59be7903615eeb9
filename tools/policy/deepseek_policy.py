"""DeepSeek's EPLB (github.com/deepseek-ai/EPLB, eplb.py) as a user's policy for eplb:

    eplb run scenario.yaml --policy-command 'python3 tools/policy/deepseek_policy.py'

Rewritten here as a user would bring it, not calling eplb: the same run folder as the built-in
`deepseek` when torch sorts as the reference did (torch's CPU sort; see python/eplb/deepseek.py
on ties). Lost GPUs are not handled: a run that loses one fails, naming the GPU.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policy_client import serve  # noqa: E402


def balanced_packing(weight, num_packs):
    num_layers, num_groups = weight.shape
    groups_per_pack = num_groups // num_packs
    if groups_per_pack == 1:
        pack_index = torch.arange(weight.size(-1), dtype=torch.int64).expand(weight.shape)
        return pack_index, torch.zeros_like(weight, dtype=torch.int64)
    indices = weight.float().sort(-1, descending=True).indices
    pack_index = torch.full_like(weight, fill_value=-1, dtype=torch.int64)
    rank_in_pack = torch.full_like(pack_index, fill_value=-1)
    for i in range(num_layers):
        pack_weights = [0] * num_packs
        pack_items = [0] * num_packs
        for group in indices[i]:
            pack = min((p for p in range(num_packs) if pack_items[p] < groups_per_pack),
                       key=pack_weights.__getitem__)
            pack_index[i, group] = pack
            rank_in_pack[i, group] = pack_items[pack]
            pack_weights[pack] += weight[i, group]
            pack_items[pack] += 1
    return pack_index, rank_in_pack


def replicate_experts(weight, num_phy):
    n, num_log = weight.shape
    phy2log = torch.arange(num_phy, dtype=torch.int64).repeat(n, 1)
    rank = torch.zeros(n, num_phy, dtype=torch.int64)
    logcnt = torch.ones(n, num_log, dtype=torch.int64)
    arangen = torch.arange(n, dtype=torch.int64)
    for i in range(num_log, num_phy):
        redundant_indices = (weight / logcnt).max(dim=-1).indices
        phy2log[:, i] = redundant_indices
        rank[:, i] = logcnt[arangen, redundant_indices]
        logcnt[arangen, redundant_indices] += 1
    return phy2log, rank, logcnt


def rebalance_experts_hierarchical(weight, num_physical_experts, num_groups, num_nodes, num_gpus):
    num_layers, num_logical_experts = weight.shape
    group_size = num_logical_experts // num_groups
    groups_per_node = num_groups // num_nodes
    phy_experts_per_gpu = num_physical_experts // num_gpus

    def inverse(perm):
        inv = torch.empty_like(perm)
        inv.scatter_(1, perm, torch.arange(perm.size(1), dtype=torch.int64).expand(perm.shape))
        return inv

    tokens_per_group = weight.unflatten(-1, (num_groups, group_size)).sum(-1)
    group_pack_index, group_rank_in_pack = balanced_packing(tokens_per_group, num_nodes)
    log2mlog = (((group_pack_index * groups_per_node + group_rank_in_pack)
                 * group_size).unsqueeze(-1)
                + torch.arange(group_size, dtype=torch.int64)).flatten(-2)
    mlog2log = inverse(log2mlog)
    tokens_per_mlog = weight.gather(-1, mlog2log).view(-1, num_logical_experts // num_nodes)
    phy2mlog, phyrank, mlogcnt = replicate_experts(tokens_per_mlog,
                                                   num_physical_experts // num_nodes)
    tokens_per_phy = (tokens_per_mlog / mlogcnt).gather(-1, phy2mlog)
    pack_index, rank_in_pack = balanced_packing(tokens_per_phy, num_gpus // num_nodes)
    phy2pphy = pack_index * phy_experts_per_gpu + rank_in_pack
    pphy2phy = inverse(phy2pphy)
    pphy2mlog = phy2mlog.gather(-1, pphy2phy)
    pphy2mlog = (pphy2mlog.view(num_layers, num_nodes, -1) + torch.arange(
        0, num_logical_experts, num_logical_experts // num_nodes).view(1, -1, 1)).flatten(-2)
    return mlog2log.gather(-1, pphy2mlog)


def rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):
    weight = weight.float().cpu()
    if num_groups % num_nodes == 0:
        return rebalance_experts_hierarchical(weight, num_replicas, num_groups, num_nodes, num_gpus)
    return rebalance_experts_hierarchical(weight, num_replicas, 1, 1, num_gpus)  # global


def policy(load, old, *, nodes, gpus, groups, lost, step):
    if lost.any():
        raise ValueError(f"GPUs {lost.nonzero()[0].tolist()} are lost; this policy cannot place "
                         "around them")
    weight = torch.from_numpy(load.astype("float32"))
    return rebalance_experts(weight, old.shape[1], groups, nodes, gpus).numpy()


if __name__ == "__main__":
    serve(policy)
