// Schedule: the order a placed run takes its nodes in, and its predicted time with the host and
// each device as timelines of their own, so device work the host has enqueued overlaps host work.
#pragma once

#include <vector>

#include "router/placement.h"

namespace lumen::router {

// A topological order of `problem`'s nodes placed on `device` (per node) that enqueues device work
// as early as it can: among the nodes ready to run it takes device nodes first, then host nodes
// whose results a device reads later (directly or through other host nodes), then the other host
// nodes; within each group, the problem's order. Device kernels are asynchronous, so host work
// taken after them runs while the device computes. On one device it is the problem's order.
std::vector<int> run_order(const PlacementProblem& problem, const std::vector<int>& device);

// The predicted time of one run with node i on device[i], taken in `order` (a topological order of
// every node), where the host and each device keep their own clock:
//   - a host kernel runs on the host clock;
//   - a device kernel takes problem.launch_us[d] on the host clock to launch, starts once it is
//     launched and the device is free (inputs made on that device are ready by then: its work
//     runs in order) and takes its cost on the device clock;
//   - copies run as the executable runs them (Backend::move), on the device's copy stream:
//     - a value made on the host goes to a device as soon as the host is free, which is busy for
//       the copy (it stages the data) and does not wait for the device; the device's later work
//       waits for the copy;
//     - a value made on a device comes to the host once the host is free and the value is made,
//       without waiting for the device work queued after it; the host waits for the copy;
//     - a graph input, and a value moving between two devices, is copied once the host and the
//       devices involved are free (a device's earlier work included) and ends on all of them;
//   - graph outputs made on a device are copied to the host after the last node, as the last
//     (once the device is free).
// On a chain over the host and one device it is evaluate() plus the launch of each device kernel
// that follows host work (the device waits for it); on any graph at most evaluate() plus every
// device kernel's launch (each kernel and copy is counted once, and a clock waits only while
// another is busy or launching). Throws InvalidArgument when `order` is not a topological order
// of every node.
double simulate(const PlacementProblem& problem, const std::vector<int>& device,
                const std::vector<int>& order);

}  // namespace lumen::router
