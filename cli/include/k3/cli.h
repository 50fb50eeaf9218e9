// The k3serve subcommands that live in the engine (they touch checkpoints and weights). Each
// takes the arguments after the subcommand name and returns the process exit code (README,
// "Exit codes"). cli/main.cpp dispatches to them.
#pragma once

namespace k3::cli {

int make_model_main(int argc, char** argv);   // make-model OUT_DIR --preset NAME [--seed N] [--shards N]
int inspect_main(int argc, char** argv);      // inspect MODEL_DIR
int verify_main(int argc, char** argv);       // verify MODEL_DIR
int run_main(int argc, char** argv);          // run MODEL_DIR (--ids|--prompt|--prompt-file) ...
int tokenize_main(int argc, char** argv);     // tokenize --tokenizer DIR [--allow-special]
int detokenize_main(int argc, char** argv);   // detokenize --tokenizer DIR
int pack_trunk_main(int argc, char** argv);   // pack-trunk MODEL_DIR OUT_DIR
int diskbench_main(int argc, char** argv);
int doctor_main(int argc, char** argv);       // doctor [MODEL_DIR | CONFIG.json] [--json]
int download_main(int argc, char** argv);     // download REPO DEST [--revision R]    // diskbench PATH
int embed_image_main(int argc, char** argv);  // embed-image MODEL_DIR IMAGE --out ROWS.f32
int plan_main(int argc, char** argv);         // plan [MODEL_DIR | CONFIG.json] [--memory-gb N,...]
int netbench_main(int argc, char** argv);     // netbench [MODEL_DIR | CONFIG.json]: the ranks' exchange (under mpirun)
int rank_main(int argc, char** argv);         // rank MODEL_DIR: a rank >= 1 of expert parallelism (under mpirun)

}  // namespace k3::cli
