import inikit


def test_dumps_simple():
    config = inikit.loads("[a]\nx = 1\ny=two\n")
    assert inikit.dumps(config) == "[a]\nx = 1\ny = two\n"


def test_dumps_custom_separator():
    config = inikit.loads("[a]\nx = 1\n")
    assert inikit.dumps(config, separator=": ") == "[a]\nx: 1\n"


def test_default_section_written_first_only_when_used():
    assert inikit.dumps(inikit.loads("[a]\nx = 1\n")).startswith("[a]")
    text = inikit.dumps(inikit.loads("[a]\nx = 1\n[DEFAULT]\nt = 2\n"))
    assert text == "[DEFAULT]\nt = 2\n\n[a]\nx = 1\n"


def test_empty_section_is_kept():
    config = inikit.loads("[empty]\n[a]\nx = 1\n")
    assert inikit.dumps(config) == "[empty]\n\n[a]\nx = 1\n"


def test_multiline_value_is_indented():
    config = inikit.loads("[a]\nhosts = one\n    two\n")
    assert inikit.dumps(config) == "[a]\nhosts = one\n    two\n"


def test_value_with_outer_spaces_is_quoted():
    config = inikit.Config()
    config.set("a", "pad", "  x  ")
    assert inikit.dumps(config) == '[a]\npad = "  x  "\n'


def test_round_trip_preserves_everything():
    config = inikit.Config()
    config.set("DEFAULT", "timeout", "30")
    config.set("s", "pad", " spaced ")
    config.set("s", "hash", "a # b")
    config.set("s", "lines", "one\ntwo")
    config.add_section("empty")
    assert inikit.loads(inikit.dumps(config)) == config


def test_empty_config_dumps_to_empty_text():
    assert inikit.dumps(inikit.Config()) == ""
