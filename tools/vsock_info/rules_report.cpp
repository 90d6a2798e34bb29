#include "tools/vsock_info/rules_report.hpp"


#include <cstdio>
#include <fstream>
#include <vector>

#include "core/setting_text.hpp"

namespace vsock::info {
namespace {

// The file's lines, so a rule is shown as it was written.
std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string trimmed(const std::string& text) {
  size_t hash = text.find('#');
  std::string body = text.substr(0, hash);
  size_t first = body.find_first_not_of(" \t"), last = body.find_last_not_of(" \t\r");
  return first == std::string::npos ? "" : body.substr(first, last - first + 1);
}

void print_proto(const core::Config& config, const std::vector<std::string>& lines, core::Proto proto,
                 const char* proto_name, const std::string& program, uint16_t port) {
  bool decided = false;
  for (const core::Rule& rule : config.rules) {
    if (!core::rule_applies(rule, proto, program, port)) continue;
    std::string text = rule.line >= 1 && static_cast<size_t>(rule.line) <= lines.size()
                           ? trimmed(lines[static_cast<size_t>(rule.line) - 1])
                           : "?";
    bool conditional = core::rule_is_conditional(rule);
    std::printf("  %s: %s:%d  %s%s\n", proto_name, config.file.c_str(), rule.line, text.c_str(),
                conditional ? "   (only sockets with this role/address)" : "");
    if (!conditional) {
      decided = true;
      break;  // later rules are never reached for this program and port
    }
  }
  if (!decided) {
    std::string value = core::setting_text(config.settings, proto_name);
    std::printf("  %s: %s: %s (setting %s, %s)\n", proto_name,
                config.rules.empty() ? "no rules" : "otherwise", value.c_str(), proto_name,
                core::describe_origin(core::origin_of(config, proto_name)).c_str());
  }
}

}  // namespace

void print_rules(const core::Config& config, const std::string& program, uint16_t port) {
  std::printf("rules for program %s, port %u (first match decides):\n", program.c_str(), port);
  std::vector<std::string> lines;
  if (!config.file.empty()) lines = read_lines(config.file);
  print_proto(config, lines, core::Proto::kTcp, "tcp", program, port);
  print_proto(config, lines, core::Proto::kUdp, "udp", program, port);
}

}  // namespace vsock::info
