"""Generated JSON bodies against every write route: a 4xx or a 2xx, never a 5xx."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import register

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=600),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=6),
    max_leaves=20,
)


def _bodies_for(field_names):
    """Bodies that mix the route's own field names with anything at all."""
    keys = st.sampled_from(field_names) | st.text(max_size=15) if field_names else st.text(max_size=15)
    return st.dictionaries(keys, json_values, max_size=8) | json_values


def _path(rule, user_id, other_id):
    path = rule.rule
    for name in rule.arguments:
        value = other_id if "id" in name.lower() else "someone"
        path = path.replace(f"<{name}>", value)
    return path.replace("<", "").replace(">", "")


def _field_names(app, rule):
    from quart_schema.validation import QUART_SCHEMA_REQUEST_ATTRIBUTE

    view = app.view_functions[rule.endpoint]
    model = getattr(view, QUART_SCHEMA_REQUEST_ATTRIBUTE, (None,))[0]
    return sorted(getattr(model, "model_fields", {}))


async def test_generated_bodies_never_cause_a_server_error(app, client):
    user = await register(client)
    other = await register(client)
    rules = [r for r in app.url_map.iter_rules() if r.methods & {"POST", "PUT", "PATCH", "DELETE"} and not r.websocket]
    assert rules, "no write routes found"
    failures = []
    # Generating is most of this test's time, and the examples depend on the field names
    # alone (derandomized: the same strategy gives the same examples), so routes with the
    # same fields (about half have none) are sent one list generated once.
    examples_by_fields = {}

    for rule in rules:
        method = sorted(rule.methods & {"POST", "PUT", "PATCH", "DELETE"})[0]
        path = _path(rule, user.id, other.id)
        fields = tuple(_field_names(app, rule))
        if fields not in examples_by_fields:
            examples_by_fields[fields] = _generated_examples(list(fields))
        for body, authorised in examples_by_fields[fields]:
            headers = user.headers if authorised else {}
            response = await client.open(path, method=method, json=body, headers=headers)
            if response.status_code >= 500:
                failures.append((method, path, body, response.status_code, await response.get_data(as_text=True)))
    assert failures == []


def _generated_examples(field_names):
    """25 (body, authorised) examples for a route with these field names, generated up front
    (the client is async: each is sent afterwards on this Trio loop)."""
    examples = []

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(body=_bodies_for(field_names), authorised=st.booleans())
    def collect(body, authorised):
        examples.append((body, authorised))

    collect()
    assert len(examples) >= 10, "hypothesis generated too few bodies"
    return examples
