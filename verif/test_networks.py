"""The one network file format: its schema, the built-ins dumped and loaded back, bad files, the models' converters."""
import json

import jsonschema
import pytest

from trainforge.cli import main
from trainforge.commands.networks.builtins import builtin_networks, models_taking, resolve
from trainforge.errors import ConfigError
from trainforge.spec import network as network_format
from trainforge.sim.caterpillar.arch import widths_from_network
from trainforge.sim.dsm.workload import BUILTINS as DSM_BUILTINS, workload_from_network
from trainforge.sim.hypar.builtins import BUILTIN_NETWORKS as HYPAR_BUILTINS
from trainforge.sim.hypar.network import from_spec
from trainforge.sim.neurotrainer.networks import layers_from_network as neurotrainer_layers, parameter_count
from trainforge.sim.tensordash.training import layers_from_network as tensordash_layers

BUILTIN_NAMES = list(builtin_networks())

#: A small network written by hand: a padded convolution with pooling, an unpadded one, two fc layers.
SMALL_YAML = """\
name: small
minibatch: 16
layers:
  - {name: c1, kind: conv, in_channels: 3, out_channels: 8, kernel: 3, in_height: 16, in_width: 16, padding: 1,
     pool: max, pool_kernel: 2, aux: [bias, relu]}
  - {name: c2, kind: conv, in_channels: 8, out_channels: 12, kernel: 3, in_height: 8, in_width: 8, stride: 2}
  - {name: f1, kind: fc, in_channels: 108, out_channels: 20, aux: [relu]}
  - {name: f2, kind: fc, in_channels: 20, out_channels: 10}
"""


def write(tmp_path, text, name="net.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_schema_ships_in_the_package_and_is_a_valid_schema():
    schema = network_format.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$defs"]["layer"]["properties"]["kind"]["enum"] == ["conv", "fc", "lstm"]


def test_every_model_has_builtins_listed():
    assert {name.split("/")[0] for name in BUILTIN_NAMES} == {"hypar", "dsm", "neurotrainer", "caterpillar",
                                                              "tensordash"}
    assert len(BUILTIN_NAMES) == len({name.lower() for name in BUILTIN_NAMES})


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_validates_against_the_schema(name):
    record = resolve(name).to_dict()
    jsonschema.validate(record, network_format.schema())
    assert json.loads(json.dumps(record)) == record


@pytest.mark.parametrize("file_format", ["yaml", "json"])
@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_round_trip_through_the_command_line(name, file_format, tmp_path, capsys):
    path = tmp_path / f"network.{file_format}"
    assert main(["networks", "show", name, "--format", file_format, "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["networks", "show", name, "--format", file_format]) == 0
    assert capsys.readouterr().out == path.read_text()
    loaded = network_format.load(path)
    original = resolve(name)
    assert loaded == original
    # every model that takes the built-in takes the edited-and-loaded file to the same internal form
    assert models_taking(loaded) == models_taking(original)


@pytest.mark.parametrize("name", list(HYPAR_BUILTINS))
def test_hypar_builtin_file_gives_the_builtin(name, tmp_path):
    path = write(tmp_path, network_format.dumps(resolve(f"hypar/{name}")))
    assert from_spec(network_format.load(path)) == HYPAR_BUILTINS[name]()


@pytest.mark.parametrize("name", list(DSM_BUILTINS))
def test_dsm_builtin_file_gives_the_builtin(name, tmp_path):
    path = write(tmp_path, network_format.dumps(resolve(f"dsm/{name}"), "json"), "net.json")
    assert workload_from_network(network_format.load(path)) == DSM_BUILTINS[name]()


def test_other_models_take_their_builtin_files(tmp_path):
    alexnet = network_format.load(write(tmp_path, network_format.dumps(resolve("neurotrainer/alexnet"))))
    layers = neurotrainer_layers(alexnet)
    # AlexNet with C2, C4, C5 in two groups: 60,954,656 weights without biases
    assert parameter_count("alexnet") == 60_954_656
    weights = sum(d["inputs"] * d["outputs"] if kind == "fc" else
                  d["out_channels"] * d["in_channels"] // d["groups"] * d["kernel"] ** 2 for _, kind, d in layers)
    assert weights == 60_954_656
    assert [d["out_h"] for _, kind, d in layers if kind == "conv"] == [55, 27, 13, 13, 13]
    mlp = network_format.load(write(tmp_path, network_format.dumps(resolve("caterpillar/500x4-10")), "mlp.yaml"))
    assert widths_from_network(mlp) == (784, 500, 500, 500, 500, 10)
    cnn = network_format.load(write(tmp_path, network_format.dumps(resolve("digits-cnn")), "cnn.yaml"))
    assert tensordash_layers(cnn) == (("conv1", "conv", (8, 1, 3, 3)), ("conv2", "conv", (16, 8, 3, 3)),
                                      ("fc1", "fc", (64, 256)), ("fc2", "fc", (10, 64)))


def test_same_file_gives_hypar_and_dsm_the_same_shapes(tmp_path):
    description = network_format.load(write(tmp_path, SMALL_YAML))
    hypar = from_spec(description)
    dsm = workload_from_network(description)
    assert dsm.n_mb == 16
    # worked by hand: c1 16x16 (pad 1) -> 16x16, pooled 8x8; c2 8x8 stride 2 -> 3x3; 12 * 3 * 3 = 108 inputs to f1
    assert [(layer.out_height, layer.out_width) for layer in hypar.layers[:2]] == [(16, 16), (3, 3)]
    assert [layer.n_ij for layer in dsm.layers] == [256, 9, 1, 1]
    assert dsm.layers[0].stored_output_ij == 64 == hypar.layers[0].pooled_height * hypar.layers[0].pooled_width
    for mine, theirs in zip(hypar.layers, dsm.layers):
        assert (mine.name, mine.kind) == (theirs.name, theirs.kind)
        assert (mine.in_channels, mine.out_channels) == (theirs.n_in, theirs.n_out)
        assert mine.out_height * mine.out_width == theirs.n_ij
        assert mine.kernel ** 2 == theirs.n_kij and mine.stride == theirs.stride
        assert mine.weights == theirs.weights
    assert [layer.weights for layer in hypar.layers] == [3 * 8 * 9, 8 * 12 * 9, 108 * 20, 200]
    assert dsm.layers[0].aux == ("bias", "relu", "maxpool") and dsm.layers[0].pool_window == 4


@pytest.mark.parametrize("name", ["hypar/VGG-D", "dsm/vgg16", "caterpillar/500-500-500-10", "hypar/Lenet-c"])
def test_builtins_both_take_agree(name):
    hypar, dsm = from_spec(resolve(name)), workload_from_network(resolve(name))
    assert [layer.weights for layer in hypar.layers] == [layer.weights for layer in dsm.layers]
    assert [layer.out_height * layer.out_width for layer in hypar.layers] == [layer.n_ij for layer in dsm.layers]


def layer_text(**fields):
    record = {"name": "l0", "kind": "fc", "in_channels": 4, "out_channels": 4, **fields}
    return json.dumps(record)


#: (file name, content, the one line after "trainforge networks: PATH: ").
BAD_FILES = [
    ("syntax.yaml", "name: x\nlayers: [\n", "invalid YAML at line 3 column 1 (expected the node content, "
                                            "but found '<stream end>')"),
    ("syntax.json", '{"name": "x",}', "invalid JSON at line 1 column 14 (Expecting property name enclosed "
                                      "in double quotes)"),
    ("top.yaml", "- 1\n", "expected a mapping with 'name' and 'layers', got a list"),
    ("noname.yaml", "layers: [" + layer_text() + "]\n", "name: required field is missing"),
    ("empty.yaml", "name: x\nlayers: []\n", "layers: expected at least 1 item(s), got none"),
    ("missing.yaml", "name: x\nlayers: [" + layer_text() + ', {"name": "l1", "kind": "fc", "in_channels": 4}]\n',
     "layers[1].out_channels: required field is missing"),
    ("unknown.yaml", "name: x\nlayers: [" + layer_text(weights=3) + "]\n",
     "layers[0].weights: unknown field; expected one of aux, bidirectional, concat_from, groups, in_channels, "
     "in_height, in_width, input_from, kernel, kind, name, out_channels, out_height, out_width, padding, pool, "
     "pool_kernel, pool_padding, pool_stride, residual_from, stride, timesteps"),
    ("type.yaml", "name: x\nlayers: [" + layer_text(in_channels="4") + "]\n",
     "layers[0].in_channels: expected an integer, got '4'"),
    ("bool.yaml", "name: x\nlayers: [" + layer_text(out_channels=True) + "]\n",
     "layers[0].out_channels: expected an integer, got true (a boolean)"),
    ("range.yaml", "name: x\nlayers: [" + layer_text() + ", " + layer_text(name="l1", out_channels=0) + "]\n",
     "layers[1].out_channels: expected an integer >= 1, got 0"),
    ("kind.yaml", "name: x\nlayers: [" + layer_text(kind="pool") + "]\n",
     "layers[0].kind: expected one of conv, fc, lstm, got 'pool'"),
    ("aux.yaml", "name: x\nlayers: [" + layer_text(aux=["relu", "gelu"]) + "]\n",
     "layers[0].aux[1]: expected one of bias, relu, sigmoid, tanh, residual, softmax, batchnorm, got 'gelu'"),
    ("convkeys.yaml", "name: x\nlayers: [" + layer_text(kind="conv", in_height=8, in_width=8) + "]\n",
     "layers[0].kernel: required field is missing (a conv layer needs kernel, in_height, in_width)"),
    ("outsize.yaml", "name: x\nlayers: [" + layer_text(kind="conv", kernel=3, in_height=8, in_width=8,
                                                       out_height=8) + "]\n",
     "layers[0].out_height: expected 6 (from in_height=8, kernel=3, stride=1, padding=0), got 8"),
    ("padding.yaml", "name: x\nlayers: [" + layer_text(kind="conv", kernel=3, in_height=8, in_width=8,
                                                       padding=3) + "]\n",
     "layers[0].padding: expected 0..2 (kernel - 1), got 3"),
    ("bigkernel.yaml", "name: x\nlayers: [" + layer_text(kind="conv", kernel=5, in_height=8, in_width=4) + "]\n",
     "layers[0].kernel: expected at most the padded in_width 4, got 5"),
    ("groups.yaml", "name: x\nlayers: [" + layer_text(kind="conv", kernel=1, in_height=2, in_width=2,
                                                      groups=3) + "]\n",
     "layers[0].in_channels: expected a multiple of groups=3, got 4"),
    ("pool.yaml", "name: x\nlayers: [" + layer_text(kind="conv", kernel=1, in_height=2, in_width=2,
                                                    pool_stride=2) + "]\n",
     "layers[0].pool_stride: expected no pooling field without pool_kernel"),
    ("fckernel.yaml", "name: x\nlayers: [" + layer_text(kernel=3) + "]\n",
     "layers[0].kernel: expected no kernel in a fc layer (only conv takes it)"),
    ("duplicate.yaml", "name: x\nlayers: [" + layer_text() + ", " + layer_text() + "]\n",
     "layers[1].name: expected a unique name, got 'l0' a second time"),
    ("from.yaml", "name: x\nlayers: [" + layer_text(input_from="l9") + "]\n",
     "layers[0].input_from: expected the name of an earlier layer, got 'l9'"),
    ("residual.yaml", "name: x\nlayers: [" + layer_text() + ", " + layer_text(name="l1", aux=["residual"]) + "]\n",
     "layers[1].residual_from: expected aux 'residual' and residual_from together"),
    ("bidirectional.yaml", "name: x\nlayers: [" + layer_text(bidirectional=True) + "]\n",
     "layers[0].bidirectional: expected false for a fc layer (only lstm is bidirectional)"),
]


@pytest.mark.parametrize("file_name, text, message", BAD_FILES, ids=[case[0] for case in BAD_FILES])
def test_bad_file_is_one_line_naming_file_and_field(file_name, text, message, tmp_path, capsys):
    path = write(tmp_path, text, file_name)
    with pytest.raises(ConfigError) as raised:
        network_format.load(path)
    assert str(raised.value) == f"{path}: {message}"
    for command in (["networks", "check"], ["hypar", "partition"], ["dsm", "explore"]):
        assert main([*command, str(path)]) == 2
        assert capsys.readouterr().err == f"trainforge {command[0]}: {path}: {message}\n"


def test_missing_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "absent.yaml"
    assert main(["networks", "check", str(path)]) == 2
    assert capsys.readouterr().err == (f"trainforge networks: {path}: cannot read the network file "
                                       "(No such file or directory)\n")


@pytest.mark.parametrize("convert, name, message", [
    (from_spec, "dsm/gnmt", "layers[0].kind: HyPar takes conv and fc layers, got lstm (layer 'enc0')"),
    (from_spec, "neurotrainer/alexnet", "layers[1].groups: HyPar takes ungrouped convolutions, got 2 (layer 'C2')"),
    (from_spec, "dsm/resnet50", "layers[0].pool_padding: HyPar takes pooling without padding, got 1 "
                                "(layer 'conv1')"),
    (workload_from_network, "neurotrainer/vgg16", None),
    (workload_from_network, "hypar/AlexNet", "layers[0].pool_stride: DeepSpatialMatrix stores n_ij / "
                                             "pool_stride**2 values and needs out_height * out_width = 3025 "
                                             "divisible by pool_stride**2, got pool_stride 2 (layer 'conv1')"),
    (neurotrainer_layers, "dsm/gnmt", "layers[0].kind: NeuroTrainer takes conv and fc layers, got lstm "
                                      "(layer 'enc0')"),
    (widths_from_network, "hypar/Lenet-c", "layers[0].kind: CATERPILLAR trains chains of fc layers, got conv "
                                           "(layer 'conv1')"),
    (tensordash_layers, "neurotrainer/alexnet", "layers[1].groups: the TensorDash layer model takes 1, got 2 "
                                                "(layer 'C2')"),
])
def test_a_model_names_the_layer_it_cannot_take(convert, name, message):
    description = resolve(name)
    if message is None:
        convert(description)
        return
    with pytest.raises(ConfigError) as raised:
        convert(description, source="f.yaml")
    assert str(raised.value) == f"f.yaml: {message}"


def test_hypar_chain_error_names_the_file(tmp_path, capsys):
    text = SMALL_YAML.replace("in_channels: 108", "in_channels: 100")
    path = write(tmp_path, text)
    assert main(["hypar", "partition", str(path)]) == 2
    assert capsys.readouterr().err == (f"trainforge hypar: {path}: layer 'f1': in_channels=100 but layer 'c2' "
                                       "produces 108 values\n")
    # DeepSpatialMatrix does not chain shapes: it takes the file
    assert main(["dsm", "explore", str(path)]) == 0


def test_caterpillar_chain_error(tmp_path):
    text = "name: m\nlayers: [" + layer_text() + ", " + layer_text(name="l1", in_channels=5) + "]\n"
    with pytest.raises(ConfigError, match=r"^.*: layers\[1\]\.in_channels: expected 4, the previous layer's "
                                          r"outputs, got 5 \(layer 'l1'\)$"):
        widths_from_network(network_format.load(write(tmp_path, text)))


def test_file_and_builtin_give_the_same_hypar_result(tmp_path, capsys):
    assert main(["hypar", "partition", "AlexNet", "--json"]) == 0
    builtin = json.loads(capsys.readouterr().out)
    path = tmp_path / "alexnet.yaml"
    assert main(["networks", "show", "hypar/alexnet", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["hypar", "partition", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == builtin


def test_names(capsys):
    assert main(["networks", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert list(rows) == BUILTIN_NAMES
    assert rows["dsm/gnmt"]["models"] == ["dsm"] and rows["dsm/gnmt"]["kinds"] == ["fc", "lstm"]
    assert main(["networks", "show", "alexnet"]) == 2
    assert capsys.readouterr().err == ("trainforge networks: network 'alexnet' is ambiguous; say which: "
                                       "hypar/AlexNet, neurotrainer/alexnet\n")
    assert main(["networks", "show", "nothing"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainforge networks: unknown network 'nothing'; built-ins: hypar/SFC, ")
    assert main(["dsm", "explore", "hypar/Lenet-c", "--minibatch", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"] == "Lenet-c"


def test_neurotrainer_compiles_a_layer_of_a_network_file(tmp_path, capsys):
    path = write(tmp_path, SMALL_YAML)
    assert main(["neurotrainer", "compile", "--network", str(path), "--network-layer", "c1", "--dims", "n=2",
                 "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    # c1 read through add_pad: 16 + 2 * 1 = 18 rows and columns
    assert main(["neurotrainer", "compile", "--layer", "conv_ff", "--dims", "n=2,d=3,h=18,w=18,o=8,hk=3,wk=3",
                 "--json"]) == 0
    assert from_file == json.loads(capsys.readouterr().out)
    assert main(["neurotrainer", "compile", "--network", str(path), "--network-layer", "f1", "--pass", "up",
                 "--json"]) == 0
    assert main(["neurotrainer", "compile", "--layer", "fc_up", "--dims", "h=20,k=108,n=1", "--json"]) == 0
    first, second = capsys.readouterr().out.split("\n}\n", 1)
    assert json.loads(first + "\n}") == json.loads(second)
    assert main(["neurotrainer", "compile", "--network", str(path), "--network-layer", "c2"]) == 2
    assert capsys.readouterr().err == (f"trainforge neurotrainer: {path}: layers[1].stride: the NeuroTrainer "
                                       "compiler takes 1, got 2 (layer 'c2')\n")


def test_caterpillar_study_trains_a_network_file(tmp_path, capsys):
    from trainforge.commands.caterpillar.cli import network_widths, study

    path = write(tmp_path, "name: mlp\nlayers:\n  - {name: h1, kind: fc, in_channels: 784, out_channels: 32}\n"
                           "  - {name: out, kind: fc, in_channels: 32, out_channels: 10}\n")
    widths = network_widths([str(path), "500x4-10"])
    assert widths == {str(path): (784, 32, 10), "500x4-10": (784, 500, 500, 500, 500, 10)}
    result = study([str(path)], [("SGD", 1)], 1, 1.0, (0.5,), 0, 1, widths=widths)
    (run,) = result["runs"]
    assert run["network"] == str(path) and run["trained_widths"] == [784, 32, 10]
    assert sorted(run["priced"]) == ["2x16-cores-4x4", "2x4-cores-16x16"]
    wrong = write(tmp_path, "name: mlp\nlayers: [{name: h1, kind: fc, in_channels: 784, out_channels: 12}]\n",
                  "wrong.yaml")
    assert main(["caterpillar", "rates", "--network", str(wrong)]) == 2
    assert capsys.readouterr().err == (f"trainforge caterpillar: {wrong}: layers[0].out_channels: expected 10 "
                                       "(the study trains on 28x28 images of 10 classes), got 12\n")
    assert main(["caterpillar", "rates", "--network", "nothing"]) == 2
    assert "known: 500-500-500-10, 500x4-10" in capsys.readouterr().err


def test_readme_example_is_a_valid_network(tmp_path):
    import pathlib

    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    example = readme[readme.index("## Network files"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    description = network_format.load(write(tmp_path, example))
    assert description.minibatch == 64 and description.layers[1].out_height == 7
    assert from_spec(description).layers[2].in_channels == 32 * 7 * 7
    assert workload_from_network(description).n_mb == 64


def fc_record(name, inputs, outputs, **links):
    return {"name": name, "kind": "fc", "in_channels": inputs, "out_channels": outputs, **links}


#: A concatenation worked by hand: k reads x's 4 and p's 2 outputs, 6 channels.
CONCAT = network_format.from_dict({"name": "concat", "layers": [
    fc_record("x", 4, 4), fc_record("p", 4, 2), fc_record("k", 6, 2, concat_from=["x", "p"])]}, "concat.yaml")

#: Two one-layer-reads-another networks: a branch (input_from) and a residual addition (residual_from).
BRANCH = network_format.from_dict({"name": "branch", "layers": [
    fc_record("a", 4, 4), fc_record("b", 4, 4), fc_record("c", 4, 4, input_from="a")]}, "branch.yaml")
RESIDUAL = network_format.from_dict({"name": "residual", "layers": [
    fc_record("a", 4, 4), fc_record("b", 4, 4),
    fc_record("c", 4, 4, aux=["residual"], residual_from="a")]}, "residual.yaml")

CONCAT_REFUSALS = [
    (workload_from_network, "DeepSpatialMatrix takes layers reading one earlier layer (the previous one or "
                            "input_from; residual_from adds another), not a concatenation"),
    (neurotrainer_layers, "NeuroTrainer takes chains of layers, each reading the previous one"),
    (widths_from_network, "CATERPILLAR trains plain chains of fc layers"),
    (tensordash_layers, "the TensorDash layer model takes chains of layers, each reading the previous one"),
]


@pytest.mark.parametrize("convert, takes", CONCAT_REFUSALS, ids=["dsm", "neurotrainer", "caterpillar", "tensordash"])
def test_a_model_without_concatenations_refuses_concat_from(convert, takes):
    # without the concatenation the same shapes are taken (a chain 4 -> 4 -> 2 -> 2)
    chain = network_format.from_dict({"name": "chain", "layers": [
        fc_record("x", 4, 4), fc_record("p", 4, 2), fc_record("k", 2, 2)]}, "chain.yaml")
    convert(chain)
    with pytest.raises(ConfigError) as raised:
        convert(CONCAT, source="concat.yaml")
    assert str(raised.value) == f"concat.yaml: layers[2].concat_from: {takes}, got ['x', 'p'] (layer 'k')"


@pytest.mark.parametrize("network, field, value", [(BRANCH, "input_from", "'a'"),
                                                   (RESIDUAL, "residual_from", "'a'")], ids=["branch", "residual"])
@pytest.mark.parametrize("convert, takes", CONCAT_REFUSALS[1::2], ids=["neurotrainer", "tensordash"])
def test_a_chain_model_refuses_a_layer_reading_another(network, field, value, convert, takes):
    with pytest.raises(ConfigError) as raised:
        convert(network, source="f.yaml")
    assert str(raised.value) == f"f.yaml: layers[2].{field}: {takes}, got {value} (layer 'c')"


def test_neurotrainer_compiler_takes_a_concatenation_layer_on_its_own():
    from trainforge.sim.neurotrainer.networks import compiler_layer, network_passes

    # k's 6 inputs are the concatenation's channels: compiled as any fc 6 -> 2
    assert compiler_layer(CONCAT, "k", "ff", 3) == ("fc_ff", {"h": 2, "k": 6, "n": 3})
    assert [row[:3] for row in network_passes(CONCAT, 3, ("bp",))] == [
        ("x", "bp", "fc_bp"), ("p", "bp", "fc_bp"), ("k", "bp", "fc_bp")]


def test_check_says_only_hypar_takes_googlenet(tmp_path, capsys):
    path = tmp_path / "googlenet.yaml"
    assert main(["networks", "show", "hypar/GoogLeNet", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["networks", "check", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["models"] == {"hypar": True, "dsm": False, "neurotrainer": False, "caterpillar": False,
                                "tensordash": False}
    # inception3b_1x1 (layers[9]) is the first layer reading a concatenation; inception3a_1x1 reads conv2
    assert report["reasons"]["dsm"].startswith(f"{path}: layers[9].concat_from: DeepSpatialMatrix takes ")
    assert report["reasons"]["neurotrainer"].startswith(f"{path}: layers[3].input_from: NeuroTrainer takes ")
    assert report["reasons"]["tensordash"].startswith(f"{path}: layers[3].input_from: the TensorDash layer ")
    assert main(["networks", "check", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  hypar: takes it" and lines[2].startswith(f"  dsm: {path}: layers[9].concat_from: ")


def test_list_shows_hypar_dag_builtins_and_who_takes_them(capsys):
    assert main(["networks", "list", "--json"]) == 0
    rows = {row["name"]: row["models"] for row in json.loads(capsys.readouterr().out)}
    # DeepSpatialMatrix models branches and residual additions, not concatenations
    assert rows["hypar/ResNet-18"] == rows["hypar/ResNet-50"] == ["hypar", "dsm"]
    assert rows["hypar/GoogLeNet"] == ["hypar"]
    assert rows["dsm/resnet50"] == ["dsm"]
