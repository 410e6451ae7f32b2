// Timing on several GPUs: which GPUs (--gpus all|N|LIST), and a pool of one worker process per GPU
// that takes items from one queue in the parent as it becomes free, so a slow item on one GPU never
// holds the others back. Each worker sees only its own GPU (CUDA_VISIBLE_DEVICES, set before any
// CUDA call) and forks its watchdog children from there, so every child has its own CUDA context on
// that GPU. With one GPU the pool has one worker: the same code path. Tests: tests/unit/gpu_pool_test.cpp
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sabre::tune {

// The one element of a GPU list that stands for every GPU of the machine ("--gpus all").
inline constexpr int kAllGpus = -1;

// The text of --gpus, in docker's words: "all" -> {kAllGpus}; "N" -> the first N GPUs {0..N-1};
// "0,2,3" or "device=2" (one GPU by id; also "device=0,2") -> those ids. Throws std::invalid_argument
// (what is wrong, what to write) for anything else, a count of 0, a negative id or an id given twice.
std::vector<int> parse_gpus(const std::string& text);
// A list from parse_gpus (or CompileOptions::gpus) against a machine with `count` GPUs: empty -> {0};
// {kAllGpus} -> 0..count-1; otherwise the ids as given, each checked against the count (the message
// names it) and for duplicates. Throws std::invalid_argument.
std::vector<int> resolve_gpus(const std::vector<int>& ids, int count);
// resolve_gpus against the machine's GPUs by name (index = id), also refusing GPUs of different
// models: their timings differ and the DB keys measurements by one GPU name per run, so a mixed list
// is an error naming the models (tune each model's GPUs in a run of its own).
std::vector<int> resolve_gpus(const std::vector<int>& ids, const std::vector<std::string>& names);
// The CUDA_VISIBLE_DEVICES value that leaves a child only `device` (an index as this process sees the
// GPUs): the device itself, or the device-th entry of an inherited CUDA_VISIBLE_DEVICES list.
// Throws std::invalid_argument where the inherited list has no such entry.
std::string visible_devices_for(int device, const char* inherited);

struct PoolOptions {
  std::vector<int> devices = {0};  // one worker per entry (resolved ids)
  bool set_visible_devices = true;  // each worker: CUDA_VISIBLE_DEVICES=visible_devices_for(its device)
  int max_attempts = 2;             // an item whose worker died is given to a fresh one at most this often
  int max_restarts = 3;             // per device: workers started after one died
};

// Called in the parent when an item is about to be handed out (in queue order): the payload its
// worker gets, or nullopt when the item needs no worker (all done in the parent).
using PoolPrepareFn = std::function<std::optional<std::string>(size_t item)>;
// Called in a worker process for each item it takes; `worker` indexes PoolOptions::devices.
using PoolWorkFn = std::function<void(size_t worker, size_t item, const std::string& payload)>;
// Called in the parent when an item is finished: `ok` false when it was given up (its workers died
// max_attempts times, or every worker is gone); `seconds` from hand-out to done.
using PoolDoneFn = std::function<void(size_t item, size_t worker, bool ok, double seconds)>;

// (kernel, library) pairs as a pool payload and back: length-prefixed fields, so any path survives.
using Candidates = std::vector<std::pair<std::string, std::string>>;
std::string encode_candidates(const Candidates& todo);
Candidates decode_candidates(const std::string& text);  // throws std::logic_error on a malformed payload

// Runs items 0..count-1: each is prepared once, done by one worker, reported once. Returns when all
// are reported. Workers are forked from the calling process, which must not hold a CUDA context.
void run_pool(size_t count, const PoolOptions& opts, const PoolPrepareFn& prepare, const PoolWorkFn& work,
              const PoolDoneFn& done);

}  // namespace sabre::tune
