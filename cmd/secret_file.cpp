#include "cmd/secret_file.hpp"

#include <cctype>
#include <fstream>

namespace gpupool::cmd {

Result<std::string> read_secret_file(const std::string& file, const std::string& field) {
    std::ifstream in(file);
    std::string secret(4096, '\0');
    in.read(secret.data(), static_cast<std::streamsize>(secret.size()));
    if (!in && !in.eof()) {
        return make_error(ErrorCode::invalid_input, "cannot read `" + file + "`", field);
    }
    secret.resize(static_cast<std::size_t>(in.gcount()));
    while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back())) != 0) {
        secret.pop_back();
    }
    if (secret.empty() || secret.find_first_of("\r\n") != std::string::npos) {
        return make_error(ErrorCode::invalid_input, "`" + file + "` must hold one line: the secret", field);
    }
    return secret;
}

} // namespace gpupool::cmd
