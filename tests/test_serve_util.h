// A stave::server::Server on 127.0.0.1:<free port>, run on its own thread and stopped
// (gracefully) when it goes out of scope: the scaffold every serve test shares.
#pragma once
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "server/server.h"
#include "test_util.h"

namespace stave::test {

class RunningServer {
 public:
  // `default_model` (a fixture path) stands in when o.engine.model is empty; `engine`, when
  // given, is handed to the server once it runs (as `stave serve` does after loading).
  RunningServer(server::ServeOptions o, const std::string& default_model,
                std::shared_ptr<const Engine> engine = nullptr) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.access_log = false;
    if (o.engine.model.empty()) o.engine.model = fixture(default_model);
    server_ = std::make_unique<server::Server>(std::move(o));
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    if (engine) server_->set_engine(std::move(engine));
  }
  ~RunningServer() {
    server_->stop();
    thread_.join();
  }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;
  server::Server& server() { return *server_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace stave::test
