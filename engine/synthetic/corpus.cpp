// The text the synthetic vocabulary learns its merges from (synthetic_vocab.cpp). Written for
// k3serve: everyday English prose plus a little C++, Python, shell and JSON, so that common
// words, indentation and punctuation runs become single tokens in the `demo` and larger presets.
// Changing this text changes every generated tokenizer (and so the bytes of every synthetic
// model's tiktoken.model): treat it as frozen.
#include <string_view>

namespace k3 {

std::string_view synthetic_corpus() {
    return R"CORPUS(The capital of France is Paris. It is a large city on the river Seine, and people
from all over the world come to see its museums, its parks and its old streets. In the morning
the cafes open early and the smell of fresh bread fills the air. Many visitors walk along the
river in the evening, when the lights of the bridges are reflected in the water.

Once upon a time there was a little girl who lived in a house near the forest. Every day she
went for a walk with her dog, and every day they found something new: a stone with a hole in
it, a feather, a small blue flower. One day the dog ran after a rabbit and did not come back.
The girl looked for him until it was dark. When she finally came home, the dog was sitting at
the door, waiting for her as if nothing had happened. She laughed, and they went inside
together.

A computer program is a list of instructions that a machine can follow. The instructions are
written in a programming language, such as C, C++, Python or Rust, and a compiler or an
interpreter turns them into something the processor understands. Good programs are easy to
read: the names of functions and variables say what they are, the comments explain why the
code does what it does, and each part does one thing well. When a program fails, it should
say clearly what went wrong and where, so that the person using it can fix the problem.

Machine learning models learn patterns from data. A language model reads a long sequence of
tokens and predicts the next one. During training it sees billions of examples, and its
weights are adjusted a little after each step so that its predictions become more accurate.
At inference time the weights are fixed; the model is given a prompt and generates text one
token at a time. Large models need a lot of memory, so engineers have found many ways to make
them smaller and faster: quantization, caching, streaming weights from disk, and mixtures of
experts, where only a few parts of the network are used for each token.

Weather report: Today will be mostly sunny with a light wind from the west. Temperatures will
reach 21 degrees in the afternoon and fall to 12 degrees at night. Tomorrow there is a chance
of rain in the north, and the weekend should be warm and dry. Please remember to drink enough
water and to wear a hat if you are going to be outside for a long time.

Questions and answers. What time is it? It is half past three. Where are you going? I am going
to the station to meet my brother, who is arriving on the four o'clock train. How long will
you stay? We'll stay for two weeks, then we're going back home. Why don't you come with us?
Thank you, that's very kind, but I can't leave the office this month. Maybe next year!

The history of science shows that new ideas often meet resistance before they are accepted.
Observations that do not fit the current theory are first ignored, then explained away, and
only later, when there are too many of them, do they force a change in the way people think.
Experiments must be repeated by other groups, results must be published with enough detail
to be checked, and measurements should always come with an estimate of their uncertainty.

#include <cstdio>
#include <string>
#include <vector>

// Returns the sum of all values in the list.
int sum(const std::vector<int>& values) {
    int total = 0;
    for (int value : values) {
        total += value;
    }
    return total;
}

int main(int argc, char** argv) {
    std::vector<int> numbers = {1, 2, 3, 4, 5};
    if (argc > 1) {
        std::printf("usage: %s\n", argv[0]);
        return 2;
    }
    std::printf("sum = %d\n", sum(numbers));
    return 0;
}

def read_config(path):
    """Read a configuration file and return it as a dictionary."""
    with open(path, "r", encoding="utf-8") as f:
        data = json.load(f)
    if "name" not in data:
        raise ValueError(f"{path}: missing key 'name'")
    return data


class Counter:
    def __init__(self, start=0):
        self.value = start

    def increment(self, step=1):
        self.value += step
        return self.value


for i in range(10):
    print(i, i * i)

$ mkdir -p build && cd build
$ cmake .. -DCMAKE_BUILD_TYPE=Release
$ make -j4 && ./server --port 8080 --model models/demo

{"model": "demo", "messages": [{"role": "user", "content": "Hello! How are you today?"}],
 "temperature": 0.7, "max_tokens": 128, "stream": true}

The report was finished on Monday, 3 March 2025, at 09:45. It contains 12 chapters, 48 tables
and 117 figures. The first chapter describes the problem; the second one reviews what is known
about it; the third and fourth present the method and the results; the last chapter discusses
what the results mean and what should be done next. Readers who are short of time can start
with the summary on page 2.

She said: "I think we should try again tomorrow." He answered: "Yes, but this time we need a
better plan." They both agreed that the first attempt had failed because nobody had checked
the equipment before starting. The second attempt, a week later, was a complete success.
)CORPUS";
}

}  // namespace k3
