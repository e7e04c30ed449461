// Inception v3 inference with the MIGraphX C++ API.
//
// Usage:
//   inception_inference MODEL INPUT.bin [EXPECTED.bin] [--tuned] [--save FILE.mxr]
//                       [--iterations N]
//
// MODEL is an ONNX file (parsed and compiled for the GPU here) or a compiled
// program saved as .mxr (loaded as it is, no compilation). INPUT.bin holds one
// preprocessed image as raw little-endian float32 in the model's input layout
// (1 x 3 x 299 x 299 for Inception v3); EXPECTED.bin, if given, holds the
// reference logits (PyTorch's), and the program fails when its own output
// differs by more than the tolerance. `python -m rocm_dl_guide export --output DIR`
// writes all three files.
//
// The input parameter's name is read from the program, never assumed: it
// depends on the exporter that wrote the ONNX file.

#include <migraphx/migraphx.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr double tolerance = 1e-3;  // max |ours - reference| / max |reference|
constexpr int warmup_runs  = 3;

struct options
{
    std::string model;
    std::string input;
    std::string expected;
    std::string save;
    bool tuned     = false;
    int iterations = 20;
};

[[noreturn]] void usage_error(const std::string& message)
{
    throw std::invalid_argument(message +
                                "\nusage: inception_inference MODEL INPUT.bin [EXPECTED.bin] "
                                "[--tuned] [--save FILE.mxr] [--iterations N]");
}

options parse_args(int argc, char** argv)
{
    options opts;
    std::vector<std::string> positional;
    for(int i = 1; i < argc; ++i)
    {
        const std::string arg = argv[i];
        if(arg == "--tuned")
            opts.tuned = true;
        else if(arg == "--save" and i + 1 < argc)
            opts.save = argv[++i];
        else if(arg == "--iterations" and i + 1 < argc)
            opts.iterations = std::max(1, std::atoi(argv[++i]));
        else if(arg.rfind("--", 0) == 0)
            usage_error("unknown or incomplete option " + arg);
        else
            positional.push_back(arg);
    }
    if(positional.size() < 2 or positional.size() > 3)
        usage_error("expected MODEL and INPUT.bin, and optionally EXPECTED.bin");
    opts.model = positional[0];
    opts.input = positional[1];
    if(positional.size() == 3)
        opts.expected = positional[2];
    return opts;
}

bool ends_with(const std::string& text, const std::string& suffix)
{
    return text.size() >= suffix.size() and
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::size_t element_count(const std::vector<std::size_t>& lengths)
{
    return std::accumulate(
        lengths.begin(), lengths.end(), std::size_t{1}, std::multiplies<std::size_t>{});
}

std::string dims(const std::vector<std::size_t>& lengths)
{
    std::string text;
    for(std::size_t i = 0; i < lengths.size(); ++i)
        text += (i ? " x " : "") + std::to_string(lengths[i]);
    return text;
}

// Read exactly `count` float32 values from a raw binary file.
std::vector<float> read_floats(const std::string& path, std::size_t count)
{
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if(not file)
        throw std::runtime_error(path + ": cannot open");
    const auto bytes = static_cast<std::size_t>(file.tellg());
    if(bytes != count * sizeof(float))
        throw std::runtime_error(path + ": " + std::to_string(bytes) + " bytes, expected " +
                                 std::to_string(count * sizeof(float)) + " (" +
                                 std::to_string(count) + " float32 values)");
    std::vector<float> values(count);
    file.seekg(0);
    file.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes));
    return values;
}

// Parse and compile an ONNX file for the GPU, or load a saved compiled program.
migraphx::program load_program(const options& opts)
{
    if(ends_with(opts.model, ".mxr"))
    {
        migraphx::file_options file_opts;
        file_opts.set_file_format("msgpack");
        std::cout << "Loading the compiled program " << opts.model << '\n';
        return migraphx::load(opts.model.c_str(), file_opts);
    }
    migraphx::onnx_options onnx_opts;
    // The exported batch dimension is symbolic; compile for one image.
    onnx_opts.set_default_dim_value(1);
    migraphx::program prog = migraphx::parse_onnx(opts.model.c_str(), onnx_opts);

    migraphx::compile_options compile_opts;
    compile_opts.set_offload_copy();  // copy inputs to the GPU and outputs back for us
    compile_opts.set_exhaustive_tune_flag(opts.tuned);
    std::cout << "Compiling " << opts.model << " for the GPU"
              << (opts.tuned ? " with exhaustive tuning" : "") << '\n';
    prog.compile(migraphx::target("gpu"), compile_opts);
    return prog;
}

// The program's input parameter: the first one that is not an output buffer.
std::string input_name(const migraphx::program_parameter_shapes& shapes)
{
    for(const char* name : shapes.names())
    {
        const std::string text = name;
        if(text.rfind("main:#output", 0) != 0)
            return text;
    }
    throw std::runtime_error("the program has no input parameter");
}

}  // namespace

int main(int argc, char** argv)
{
    try
    {
        const options opts     = parse_args(argc, argv);
        migraphx::program prog = load_program(opts);
        if(not opts.save.empty())
        {
            migraphx::file_options file_opts;
            file_opts.set_file_format("msgpack");
            migraphx::save(prog, opts.save.c_str(), file_opts);
            std::cout << "Saved the compiled program to " << opts.save << '\n';
        }

        const auto shapes                   = prog.get_parameter_shapes();
        const std::string name              = input_name(shapes);
        const migraphx::shape in_shape      = shapes[name.c_str()];
        const std::vector<std::size_t> lens = in_shape.lengths();
        std::cout << "Input parameter '" << name << "': " << dims(lens) << '\n';
        if(in_shape.type() != migraphx_shape_float_type)
            throw std::runtime_error("expected a float32 input");

        std::vector<float> image = read_floats(opts.input, element_count(lens));
        migraphx::program_parameters params;
        params.add(name.c_str(), migraphx::argument(in_shape, image.data()));

        // Warm up, then time each run and report the median.
        migraphx::arguments outputs = prog.eval(params);
        for(int i = 1; i < warmup_runs; ++i)
            outputs = prog.eval(params);
        std::vector<double> times_ms;
        for(int i = 0; i < opts.iterations; ++i)
        {
            const auto start = std::chrono::steady_clock::now();
            outputs          = prog.eval(params);
            const auto stop  = std::chrono::steady_clock::now();
            times_ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
        }
        std::sort(times_ms.begin(), times_ms.end());
        const double median = times_ms.size() % 2
                                  ? times_ms[times_ms.size() / 2]
                                  : (times_ms[times_ms.size() / 2 - 1] +
                                     times_ms[times_ms.size() / 2]) / 2;

        const migraphx::argument result = outputs[0];
        const auto out_shape            = result.get_shape();
        if(out_shape.type() != migraphx_shape_float_type)
            throw std::runtime_error("expected float32 logits");
        const std::size_t classes = element_count(out_shape.lengths());
        const float* logits       = reinterpret_cast<const float*>(result.data());

        // Softmax probabilities and the five most likely classes.
        const float top = *std::max_element(logits, logits + classes);
        double total    = 0;
        for(std::size_t i = 0; i < classes; ++i)
            total += std::exp(static_cast<double>(logits[i] - top));
        std::vector<std::size_t> order(classes);
        std::iota(order.begin(), order.end(), std::size_t{0});
        const std::size_t shown = std::min<std::size_t>(5, classes);
        std::partial_sort(order.begin(), order.begin() + shown, order.end(), [&](auto a, auto b) {
            return logits[a] > logits[b];
        });
        std::cout << "Output: " << dims(out_shape.lengths()) << "; top classes:\n";
        for(std::size_t rank = 0; rank < shown; ++rank)
        {
            const std::size_t k = order[rank];
            std::cout << "  " << rank + 1 << ". class " << std::setw(4) << k << "  p = "
                      << std::fixed << std::setprecision(4)
                      << std::exp(static_cast<double>(logits[k] - top)) / total << '\n';
        }
        std::cout << std::setprecision(2) << "Median latency: " << median << " ms over "
                  << opts.iterations << " runs after " << warmup_runs << " warm-up runs\n";

        if(not opts.expected.empty())
        {
            const std::vector<float> reference = read_floats(opts.expected, classes);
            double largest = 0;
            double worst   = 0;
            for(std::size_t i = 0; i < classes; ++i)
            {
                largest = std::max(largest, std::abs(static_cast<double>(reference[i])));
                worst = std::max(worst, std::abs(static_cast<double>(logits[i] - reference[i])));
            }
            const double rel = worst / (largest > 0 ? largest : 1.0);
            std::cout << std::scientific << std::setprecision(2)
                      << "Max relative error against the reference: " << rel
                      << " (tolerance " << tolerance << ")\n";
            if(rel > tolerance)
            {
                std::cerr << "inception_inference: outputs differ from the reference\n";
                return 1;
            }
        }
        return 0;
    }
    catch(const std::exception& e)
    {
        std::cerr << "inception_inference: " << e.what() << '\n';
        return 1;
    }
}
