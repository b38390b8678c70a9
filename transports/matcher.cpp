#include "transports/matcher.hpp"

#include <algorithm>
#include <utility>

namespace dcomm::transport {

RequestPtr Matcher::arrived(Transport& from, const Incoming& msg) {
  auto it = std::find_if(posted_.begin(), posted_.end(),
                         [&](const RequestPtr& r) { return matches(r->peer, r->tag, msg.source, msg.tag); });
  if (it == posted_.end()) {
    unexpected_.push_back(Unexpected{&from, msg});
    return nullptr;
  }
  RequestPtr r = std::move(*it);
  if (it == posted_.begin()) {
    posted_.pop_front();  // the usual case, without deque::erase's general shuffle
  } else {
    posted_.erase(it);
  }
  return r;
}

std::optional<Matcher::Unexpected> Matcher::post(const RequestPtr& recv) {
  auto it = std::find_if(unexpected_.begin(), unexpected_.end(), [&](const Unexpected& u) {
    return matches(recv->peer, recv->tag, u.msg.source, u.msg.tag);
  });
  if (it == unexpected_.end()) {
    posted_.push_back(recv);
    return std::nullopt;
  }
  Unexpected u = *it;
  if (it == unexpected_.begin()) {
    unexpected_.pop_front();
  } else {
    unexpected_.erase(it);
  }
  return u;
}

bool Matcher::withdraw(const Request& recv) {
  auto it = std::find_if(posted_.begin(), posted_.end(), [&](const RequestPtr& r) { return r.get() == &recv; });
  if (it == posted_.end()) return false;
  posted_.erase(it);
  return true;
}

std::deque<RequestPtr> Matcher::take_posted() { return std::exchange(posted_, {}); }

std::deque<Matcher::Unexpected> Matcher::take_unexpected() { return std::exchange(unexpected_, {}); }

}  // namespace dcomm::transport
