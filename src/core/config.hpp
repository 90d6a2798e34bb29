// Configuration: VSOCK_* environment variables over the rules file
// (VSOCK_CONFIG, default /etc/libvsock.conf) over the profile bundle over
// built-in defaults. Problems are collected as one-line diagnostics naming
// the variable or file:line; the caller prints them once.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/rules.hpp"
#include "core/setting_origin.hpp"
#include "core/settings.hpp"

namespace vsock::core {

struct Config {
  Settings settings;
  std::vector<Rule> rules;
  std::string file;                      // the rules file that was read, if any
  std::vector<std::string> diagnostics;  // one line each
  std::vector<SettingOrigin> origins;    // one per kSettingNames entry, same order
};

// Where the setting called `name` got its value (kDefault for an unknown name).
const SettingOrigin& origin_of(const Config& config, std::string_view name);

// Looks up an environment variable; returns nullptr if unset.
using EnvLookup = const char* (*)(const char* name);

// Builds a Config from the given environment and rules-file text.
// `file_text` may be null (no file); `file_name` is used in diagnostics.
Config build_config(EnvLookup env, const char* file_name, const std::string* file_text);

// The default location of the rules file when VSOCK_CONFIG is unset.
inline constexpr const char* kDefaultConfigFile = "/etc/libvsock.conf";

// The process-wide configuration, loaded on first use from the real
// environment and file.
const Config& config();

// Prints config().diagnostics to stderr, the first time it is called in the
// process. The library calls it when the program first creates a socket, so
// only processes a setting affects report it (a shell running a pipeline
// under LD_PRELOAD does not repeat it in every child).
void report_config_problems();

}  // namespace vsock::core
