-- wrk script: GET /sandboxes (the list, one page) with the key (bench/api-get).
--   SBX_KEY=sbx_... wrk -s bench/wrk/list-sandboxes.lua https://127.0.0.1:8443
-- SBX_LIST_QUERY (default "limit=10") is the query string. Any answer but
-- 200 is counted and printed at the end.
local key = os.getenv("SBX_KEY") or error("SBX_KEY is not set")
local query = os.getenv("SBX_LIST_QUERY") or "limit=10"

wrk.method = "GET"
wrk.path = "/sandboxes?" .. query
wrk.headers["Authorization"] = "Bearer " .. key

local threads = {}
function setup(thread)
	table.insert(threads, thread)
end

function init(args)
	bad = 0
end

function response(status, headers, body)
	if status ~= 200 then
		bad = bad + 1
	end
end

function done(summary, latency, requests)
	local n = 0
	for _, t in ipairs(threads) do
		n = n + t:get("bad")
	end
	io.write(string.format("not-200: %d\n", n))
end
