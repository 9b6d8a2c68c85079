-- wrk script of benchmarks/suites/serve_throughput.py: every request posts the next test
-- text (one per request, cycling), and the first SKXMC_WRK_SAMPLE answers are written to
-- SKXMC_WRK_ANSWERS (status, a space, the body; one a line) for the suite to check.
-- The bodies are read once, one JSON object a line, from SKXMC_WRK_BODIES.
local bodies, n, sent, got, answers = {}, 0, 0, 0, {}
for line in io.lines(os.getenv("SKXMC_WRK_BODIES")) do
  n = n + 1
  bodies[n] = line
end
local out = os.getenv("SKXMC_WRK_ANSWERS")
local sample = tonumber(os.getenv("SKXMC_WRK_SAMPLE"))
local headers = {["Content-Type"] = "application/json"}

function request()
  sent = sent % n + 1
  return wrk.format("POST", "/predict", headers, bodies[sent])
end

function response(status, headers, body)
  got = got + 1
  if got <= sample then
    -- a body has no newline: the server writes compact JSON
    answers[got] = status .. " " .. body
  end
  if got == sample then
    local f = io.open(out, "w")
    f:write(table.concat(answers, "\n"), "\n")
    f:close()
  end
end
