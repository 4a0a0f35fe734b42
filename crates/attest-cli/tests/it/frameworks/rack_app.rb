# A Rack app as such apps are written: Rack::MethodOverride (a POST's `_method` form or
# multipart field, or the X-HTTP-Method-Override header), then the app reading `_method`
# from Rack::Request#params, which merges the query string (split on `&` and `;`, keys
# percent-decoded) with form and multipart bodies. Rack itself reads no JSON, GraphQL or
# content coding, so neither does this app. It executes nothing: each answer says, in
# `X-Executed`, whether the request would have run a delete (an effective DELETE).
require "json"
require "rack"
require "webrick"

app = lambda do |env|
  request = Rack::Request.new(env)
  override =
    begin
      request.params["_method"]
    rescue StandardError
      nil # A body Rack cannot parse gives no params, as such apps see it.
    end
  method = override.is_a?(String) ? override.upcase : request.request_method
  executed = method == "DELETE" ? "delete" : "other"
  [200, { "Content-Type" => "application/json", "X-Executed" => executed },
   [JSON.generate({ ok: true, id: "n1" })]]
end

stack = Rack::Builder.new do
  use Rack::MethodOverride
  run app
end

server = WEBrick::HTTPServer.new(
  BindAddress: "127.0.0.1", Port: 0,
  Logger: WEBrick::Log.new(File::NULL), AccessLog: []
)
server.mount "/", Rack::Handler::WEBrick, stack.to_app
puts "listening #{server.config[:Port]}"
$stdout.flush
server.start
