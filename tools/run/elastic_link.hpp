#pragma once
// What one elastic round's agents tell each other while their ranks run (elastic_rendezvous.hpp has the keys):
// the round's first failure and successes, as node_rendezvous.hpp does for a fixed world, plus
//  - heartbeats: every agent beats agent/<id>/beat and watches the others'; one silent for --node-timeout is
//    reported as the round's failure (its agent was killed or its machine lost), so the others rendezvous again
//    without it;
//  - admissions: every --monitor-interval an agent looks at round/<r>/waiting; when an agent waits to join and the
//    round has fewer than MAX nodes, it reports a membership change (RankExit::rejoin) and every agent stops its
//    ranks to rendezvous again (torchrun's num_nodes_waiting()).

#include <memory>
#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "tools/run/elastic_rendezvous.hpp"
#include "tools/run/node_link.hpp"

namespace dcomm::run {

class ElasticLink final : public NodeLink {
 public:
  ElasticLink(const LaunchOptions& o, std::shared_ptr<Store> store, ElasticRound round, int agent_id);

  std::optional<RankExit> first_failure(int round) override;
  RankExit report_failure(int round, const RankExit& failure) override;
  void report_success(int round) override;
  bool all_succeeded(int round) override;

 private:
  void heartbeat(int round);
  void look_for_waiting(int round);

  struct Beat {
    int64_t count = -1;
    Clock::time_point changed;
  };

  const LaunchOptions& options_;
  std::shared_ptr<Store> store_;
  ElasticRound round_;
  int agent_id_;
  std::vector<Beat> beats_;
  Clock::time_point next_beat_{};
  Clock::time_point next_look_{};
};

}  // namespace dcomm::run
